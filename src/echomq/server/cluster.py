"""An embedded Valkey Cluster for tests and ``make cluster``: N primaries and their replicas, each
an :class:`~echomq.server.EmbeddedValkey` child on loopback, met, given slots and replicated.
Also :func:`migrate_slot`, the live slot migration that is safe for echomq's queues.

The nodes are stopped by pid like any embedded server (and die with their parent on Linux).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType

from echomq.engine.keys import SLOTS, Keyspace
from echomq.server.embedded import (
    EmbeddedValkey,
    ServerOptions,
    ServerStartError,
    _command,
    _Replies,
)
from echomq.wire.connector import Connector
from echomq.wire.url import ConnectionOptions

_POLL = 0.05  # seconds between checks while the nodes converge


@dataclass(frozen=True, slots=True)
class ClusterOptions:
    """The shape of the embedded cluster. Durations are seconds."""

    primaries: int = 3
    replicas: int = 1  # per primary
    node_timeout: float = 5.0  # cluster-node-timeout: how long a silent node may stay primary
    bind: str = "127.0.0.1"
    startup_timeout: float = 60.0


def admin(host: str, port: int, *args: str) -> str:
    """One command on a fresh socket; the simple, error or bulk reply as text."""
    with socket.create_connection((host, port), timeout=5.0) as sock:
        sock.sendall(_command(*args))
        return _Replies(sock).next().decode(errors="replace")


class EmbeddedCluster:
    """A real Valkey Cluster. ``start()`` returns once every node reports ``cluster_state:ok``
    and every replica is in sync with its primary."""

    def __init__(self, options: ClusterOptions = ClusterOptions()) -> None:
        if options.primaries < 1 or options.replicas < 0:
            raise ValueError("a cluster needs at least one primary and no negative replicas")
        self.options = options
        extra = (
            ("cluster-node-timeout", str(int(options.node_timeout * 1000))),
            # A shard without a primary must not stop the others serving their slots.
            ("cluster-require-full-coverage", "no"),
            ("cluster-allow-replica-migration", "no"),
            ("cluster-replica-validity-factor", "0"),
            ("repl-diskless-sync-delay", "0"),  # replicas sync at once, not after 5 s
        )
        server = ServerOptions(cluster=True, bind=options.bind, extra=extra)
        count = options.primaries * (1 + options.replicas)
        self.nodes = [EmbeddedValkey(server) for _ in range(count)]
        self.ids: dict[int, str] = {}  # port → node id

    @property
    def primaries(self) -> list[EmbeddedValkey]:
        """The nodes that started as primaries (a failover changes who serves, not this)."""
        return self.nodes[: self.options.primaries]

    @property
    def replicas(self) -> list[EmbeddedValkey]:
        """``replicas[i]`` replicates ``primaries[i % primaries]``."""
        return self.nodes[self.options.primaries :]

    @property
    def url(self) -> str:
        """The seed URL: every primary, ``valkey://h:p1,h:p2,h:p3/0``."""
        hosts = ",".join(f"{n.host}:{n.port}" for n in self.primaries)
        return f"valkey://{hosts}/0"

    def start(self) -> EmbeddedCluster:
        try:
            for node in self.nodes:
                node.start()
            self._form()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def call(self, node: EmbeddedValkey, *args: str) -> str:
        return admin(node.host, node.port, *args)

    # -- forming the cluster -------------------------------------------------------------------

    def _form(self) -> None:
        deadline = time.monotonic() + self.options.startup_timeout
        first = self.nodes[0]
        for node in self.nodes:
            self.ids[node.port] = self.call(node, "CLUSTER", "MYID")
        for node in self.nodes[1:]:
            self.call(node, "CLUSTER", "MEET", first.host, str(first.port))
        self._until(deadline, "every node knows every other", self._all_met)
        count = self.options.primaries
        for i, node in enumerate(self.primaries):
            first_slot, last_slot = i * SLOTS // count, (i + 1) * SLOTS // count - 1
            self.call(node, "CLUSTER", "ADDSLOTSRANGE", str(first_slot), str(last_slot))
        for i, node in enumerate(self.replicas):
            primary = self.primaries[i % count]
            self.call(node, "CLUSTER", "REPLICATE", self.ids[primary.port])
        self._until(deadline, "cluster_state:ok on every node", self._all_ok)

    def _all_met(self) -> bool:
        total = len(self.nodes)
        return all(len(self.call(n, "CLUSTER", "NODES").splitlines()) == total for n in self.nodes)

    def _all_ok(self) -> bool:
        # Without full coverage required, "ok" alone does not mean a node has heard of every
        # slot's owner yet: insist that each one sees all slots assigned.
        wanted = ("cluster_state:ok", f"cluster_slots_ok:{SLOTS}")
        infos = [self.call(n, "CLUSTER", "INFO") for n in self.nodes]
        if not all(word in info for info in infos for word in wanted):
            return False
        return all(
            "master_link_status:up" in self.call(n, "INFO", "replication") for n in self.replicas
        )

    def _until(self, deadline: float, what: str, check: Callable[[], bool]) -> None:
        while not check():
            if time.monotonic() >= deadline:
                raise ServerStartError(f"the embedded cluster never reached: {what}")
            time.sleep(_POLL)  # nodes gossip on their own clock: nothing to wait on but time


def hash_tag(key: str) -> str | None:
    """The ``{tag}`` of ``key`` as Valkey reads it, None when the whole key is hashed."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start + 1 : end] if start != -1 and end > start + 1 else None


async def _keys_in_slot(node: Connector, slot: int) -> list[str]:
    keys = await node.call("CLUSTER", "GETKEYSINSLOT", slot, 100_000)
    return [k.decode() for k in keys]


async def _migrate(node: Connector, target: ConnectionOptions, keys: list[str]) -> None:
    auth: list[str] = []
    if target.password is not None:
        auth = ["AUTH2", target.username or "default", target.password]
    await node.call("MIGRATE", target.host, target.port, "", 0, 10_000, *auth, "KEYS", *keys)


async def migrate_slot(
    source: ConnectionOptions,
    target: ConnectionOptions,
    slot: int,
    *,
    others: tuple[ConnectionOptions, ...] = (),
    after_batch: Callable[[str], Awaitable[None]] | None = None,
    per_queue: bool = True,
) -> list[str]:
    """Move ``slot`` from the primary ``source`` to the primary ``target`` while clients work.

    A queue's scripts touch keys they do not declare, and a script on a migrating source fails
    when it touches a key that is not there (a new job row, say). So from ``MIGRATING`` on, a
    queue's scripts run nowhere until all of its keys are on the target: they declare the root
    and the gate, which exist on neither node, so the source answers ASK and the target
    TRYAGAIN, and the router retries. Queue by queue, its keys move in ``MIGRATE`` batches,
    then its root and gate are set on the target: the queue is served there at once, reached
    by ASK, long before the slot changes hands. Other keys of the slot move last. ``others``
    (the other primaries) learn the new owner at once; ``after_batch(queue)`` runs while a
    moved queue is served by ASK (a test seam). ``per_queue=False`` is a plain reshard instead:
    all keys in batches, every queue of the slot paused until the slot changes hands. Returns
    the hash tags of the slot's queues (a shard of a sharded queue, ``q~k``, is one of them).
    """
    async with (
        Connector(source, version_fence=None) as src,
        Connector(target, version_fence=None) as dst,
    ):
        source_id, target_id = [(await n.call("CLUSTER", "MYID")).decode() for n in (src, dst)]
        await dst.call("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        await src.call("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        # Every queue of the slot is frozen now: its keys stay put until they move below.
        in_slot = await _keys_in_slot(src, slot)
        queues = sorted({t for k in in_slot if k.startswith("emq:{") and (t := hash_tag(k))})
        # A tag is a queue's or one of its shards' (q~k): each moves as a queue of its own.
        spaces = [Keyspace.for_shard(q) for q in queues] if per_queue else []
        for keys in spaces:
            mine = [k for k in in_slot if hash_tag(k) == keys.tag and k.startswith("emq:")]
            for start in range(0, len(mine), 100):
                await _migrate(src, target, mine[start : start + 100])
            # Thawed on the target: its scripts find both declared keys there.
            await dst.call_many([("ASKING",), ("MSET", keys.root, "1", keys.gate, "1")])
            if after_batch is not None:
                await after_batch(keys.tag)
        while rest := await _keys_in_slot(src, slot):
            for start in range(0, len(rest), 100):
                await _migrate(src, target, rest[start : start + 100])
                if after_batch is not None and not per_queue:
                    await after_batch("")
        for options in (target, source, *others):
            async with Connector(options, version_fence=None) as node:
                await node.call("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        for keys in spaces:
            await dst.call("DEL", keys.root, keys.gate)
    return queues


def main() -> None:
    """``make cluster``: start one and print its seed URL until Ctrl-C."""
    with EmbeddedCluster() as cluster:
        print(cluster.url, flush=True)
        for node in cluster.nodes:
            role = "primary" if node in cluster.primaries else "replica"
            print(f"  {role:8} {node.host}:{node.port}  pid {node.pid}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()

"""The cluster router: the wire for a Valkey Cluster, one pipelined connector per primary.

Each command goes to the primary that owns the slot of its keys (a script by its declared keys);
a pipeline is split per node and its replies put back in the caller's order. ``MOVED`` refreshes
the slot map and retries, ``ASK`` retries once on the named node behind ``ASKING``, and a lost
primary makes the router re-read the map until its replica took over. A command whose keys span
slots is refused before any traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Sequence
from typing import Any, Final

from echomq.errors import (
    ConnectError,
    CrossSlotError,
    EchoMQError,
    ServerError,
    VersionFenceError,
    WireError,
)
from echomq.wire.connector import WIRE_VERSION, Arg, Command, Connector
from echomq.wire.pool import Pool
from echomq.wire.slots import SLOTS, VERSION_KEY, slot
from echomq.wire.url import ConnectionOptions

log = logging.getLogger("echomq.cluster")

#: MOVED answers followed for one command before the last is raised. ASK, TRYAGAIN and
#: CLUSTERDOWN (a migration or a failover under way) are retried until the call timeout.
MAX_REDIRECTS: Final = 8
#: The least time between two reads of the slot map (a burst of MOVED reads it once).
REFRESH_INTERVAL: Final = 0.1
_RETRY_PAUSE: Final = 0.05  # TRYAGAIN (keys mid-migration) and CLUSTERDOWN (failover under way)

_SCRIPTS: Final = frozenset({"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"})
_BLOCKING_POPS: Final = frozenset({"BLPOP", "BRPOP", "BZPOPMIN", "BZPOPMAX"})
_ALL_KEYS: Final = frozenset(
    {"DEL", "UNLINK", "EXISTS", "MGET", "TOUCH", "WATCH", "SSUBSCRIBE", "SUNSUBSCRIBE"}
)
_TWO_KEYS: Final = frozenset({"LMOVE", "BLMOVE", "RPOPLPUSH", "BRPOPLPUSH", "SMOVE", "COPY"})
_KEYLESS: Final = frozenset(
    {
        "TIME", "INFO", "PING", "ECHO", "SCRIPT", "CLUSTER", "HELLO", "CLIENT", "CONFIG",
        "DBSIZE", "WAIT", "WAITAOF", "COMMAND", "FUNCTION", "LASTSAVE", "ASKING", "READONLY",
    }
)  # fmt: skip
#: Every primary keeps its own script cache: these go to all of them.
_BROADCAST: Final = frozenset({"SCRIPT"})
_REDIRECTS: Final = frozenset({"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"})


def _upper(word: Arg) -> str:
    return (word.decode() if isinstance(word, bytes) else str(word)).upper()


def command_keys(command: Sequence[Arg]) -> Sequence[Arg]:
    """The keys of ``command`` (for the commands echomq and its tests send)."""
    name = _upper(command[0])
    if name in _SCRIPTS:
        return command[3 : 3 + int(command[2])]
    if name in _BLOCKING_POPS:
        return command[1:-1]
    if name in _ALL_KEYS:
        return command[1:]
    if name in _TWO_KEYS:
        return command[1:3]
    if name in ("MSET", "MSETNX"):
        return command[1::2]
    if name == "PUBSUB":
        return command[2:] if _upper(command[1]) == "SHARDNUMSUB" else ()
    if name in _KEYLESS or len(command) < 2:
        return ()
    return command[1:2]


_slot: Final = functools.lru_cache(maxsize=8192)(slot)


def command_slot(command: Sequence[Arg]) -> int | None:
    """The one slot ``command`` touches, None for a keyless command.

    Raises :class:`CrossSlotError` when its keys span slots: checked before anything is sent.
    """
    keys = command_keys(command)
    if not keys:
        return None
    first = _slot(keys[0] if isinstance(keys[0], str | bytes) else str(keys[0]))
    for key in keys[1:]:
        if _slot(key if isinstance(key, str | bytes) else str(key)) != first:
            slots = {_text(k): _slot(k if isinstance(k, str | bytes) else str(k)) for k in keys}
            raise CrossSlotError(_upper(command[0]), slots)
    return first


def _text(value: Arg) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _redirect(error: ServerError) -> tuple[str, str]:
    """``MOVED 3999 127.0.0.1:6381`` → (``MOVED``, ``127.0.0.1:6381``)."""
    parts = error.message.split()
    return error.code, parts[2] if len(parts) > 2 else ""


class ClusterRouter:
    """The :class:`~echomq.wire.Wire` of a cluster. ``connect`` reads the slot map from a seed.

    ``moved``, ``ask`` and ``refreshes`` count the redirections followed and the slot map reads.
    """

    is_cluster = True

    def __init__(
        self, seeds: Sequence[ConnectionOptions], *, version_fence: str | None = WIRE_VERSION
    ) -> None:
        if not seeds:
            raise ValueError("a cluster router needs at least one seed")
        self.seeds = list(seeds)
        self.options = self.seeds[0]
        self.version_fence = version_fence
        self.moved = 0
        self.ask = 0
        self.refreshes = 0
        self.nodes: dict[str, Connector] = {}  # address "host:port" → connector, primaries only
        self._owners: list[str] = [""] * SLOTS  # slot → address of its primary
        self._refreshed_at = -1.0
        self._refreshing: asyncio.Future[None] | None = None
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------------

    async def connect(self) -> ClusterRouter:
        try:
            await self.refresh(force=True)
            await self._check_fence()
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        self._closed = True
        nodes, self.nodes = self.nodes, {}
        await asyncio.gather(*(node.close() for node in nodes.values()))

    async def __aenter__(self) -> ClusterRouter:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _check_fence(self) -> None:
        """``{emq}:version`` is one key with a slot of its own: checked on the node owning it."""
        if self.version_fence is None:
            return
        found = await self.call("SET", VERSION_KEY, self.version_fence, "NX", "GET")
        if found is not None and found.decode() != self.version_fence:
            raise VersionFenceError(self.version_fence, found.decode(), address=self.address_of())

    # -- the slot map --------------------------------------------------------------------------

    def owner(self, key_slot: int) -> ConnectionOptions:
        """Where the primary owning ``key_slot`` listens, per the last map read."""
        node = self.nodes.get(self._owners[key_slot])
        return node.options if node is not None else self.options

    def address_of(self, key: str | None = None) -> str:
        return self.owner(_slot(key if key is not None else VERSION_KEY)).address

    async def refresh(self, *, force: bool = False) -> None:
        """Read the slot map again (at most once per ``REFRESH_INTERVAL`` unless ``force``)."""
        if self._refreshing is not None:
            return await asyncio.shield(self._refreshing)
        if not force and time.monotonic() - self._refreshed_at < REFRESH_INTERVAL:
            return
        self._refreshing = asyncio.get_running_loop().create_future()
        try:
            await self._refresh()
            self._refreshing.set_result(None)
        except BaseException as exc:
            self._refreshing.set_exception(exc)
            self._refreshing.exception()  # retrieved: waiters get it through the shield
            raise
        finally:
            self._refreshing = None
            self._refreshed_at = time.monotonic()

    async def _refresh(self) -> None:
        shards = await self._read_slots()
        self.refreshes += 1
        owners = [""] * SLOTS
        wanted: dict[str, ConnectionOptions] = {}
        for start, end, host, port in shards:
            options = self.options.replace(host=host or self.options.host, port=port)
            wanted[options.address] = options
            owners[start : end + 1] = [options.address] * (end - start + 1)
        fresh = {
            a: Connector(o, version_fence=None) for a, o in wanted.items() if a not in self.nodes
        }
        try:
            results = await asyncio.gather(
                *(c.connect() for c in fresh.values()), return_exceptions=True
            )
        except BaseException:
            # Cancelled midway (an app closed while it connected): the connectors that came up
            # are nobody's yet, and would leave their sockets open.
            await asyncio.gather(*(c.close() for c in fresh.values()), return_exceptions=True)
            raise
        for (address, connector), result in zip(fresh.items(), results, strict=True):
            if isinstance(result, BaseException):
                log.warning("cannot reach cluster primary %s: %s", address, result)
                await connector.close()
            elif self._closed or address in self.nodes:
                await connector.close()  # closed meanwhile, or a MOVED named it first
            else:
                self.nodes[address] = connector
        gone = [a for a in self.nodes if a not in wanted]
        self._owners = owners
        for address in gone:
            await self.nodes.pop(address).close()

    async def _read_slots(self) -> list[tuple[int, int, str, int]]:
        """``CLUSTER SLOTS`` from a connected primary, else from a seed."""
        errors: list[str] = []
        for node in [n for n in self.nodes.values() if n.is_connected]:
            try:
                return _parse_slots(await node.call("CLUSTER", "SLOTS"))
            except EchoMQError as exc:
                errors.append(str(exc))
        for seed in self.seeds:
            try:
                async with Connector(seed, version_fence=None) as probe:
                    return _parse_slots(await probe.call("CLUSTER", "SLOTS"))
            except EchoMQError as exc:
                errors.append(str(exc))
        raise ConnectError("no cluster node answered CLUSTER SLOTS: " + "; ".join(errors))

    async def _node(self, key_slot: int | None) -> Connector:
        """The connector of ``key_slot``'s primary, waiting out a failover (a dead primary's
        connector is not connected: the map is read again until another node took its slots)."""
        deadline = time.monotonic() + self.options.call_timeout
        while True:
            if self._closed:
                raise ConnectError("cluster router is closed")
            if key_slot is None:
                node = next((n for n in self.nodes.values() if n.is_connected), None)
            else:
                node = self.nodes.get(self._owners[key_slot])
            if node is not None and node.is_connected:
                return node
            if node is not None and not node.established:
                # Named by a MOVED or an ASK and never connected yet: connect it now.
                with contextlib.suppress(WireError):
                    await node.connect()
                    continue
            if time.monotonic() >= deadline:
                if node is not None:
                    return node  # its own call times out with a clear error
                raise ConnectError(f"no primary serves slot {key_slot}")
            with contextlib.suppress(WireError):
                await self.refresh()
            # Polling with a deadline: a failover announces itself only through the map.
            await asyncio.sleep(_RETRY_PAUSE)

    def _by_address(self, address: str) -> Connector:
        node = self.nodes.get(address)
        if node is None:
            host, _, port = address.rpartition(":")
            node = self.nodes[address] = Connector(
                self.options.replace(host=host.strip("[]"), port=int(port)), version_fence=None
            )
        return node

    # -- calls ---------------------------------------------------------------------------------

    def call(self, *args: Arg) -> Awaitable[Any]:
        key_slot = command_slot(args)  # a cross-slot command raises here, before any traffic
        if _upper(args[0]) in _BROADCAST:
            return self._broadcast(args)
        return self._call(args, key_slot)

    async def _call(self, args: tuple[Arg, ...], key_slot: int | None) -> Any:
        asking: str | None = None
        moved = 0
        deadline = time.monotonic() + self.options.call_timeout
        while True:
            try:
                if asking is None:
                    node = await self._node(key_slot)
                    return await node.call(*args)
                node = self._by_address(asking)
                await node.connect()
                reply = (await node.call_many([("ASKING",), args]))[1]
                if isinstance(reply, ServerError):
                    raise reply
                return reply
            except ServerError as exc:
                if exc.code not in _REDIRECTS:
                    raise
                moved += exc.code == "MOVED"
                if moved > MAX_REDIRECTS or time.monotonic() >= deadline:
                    raise
                asking = await self._follow(exc)
            except WireError:
                self._refresh_soon()
                raise

    async def _follow(self, error: ServerError) -> str | None:
        """Account for a redirection; the address to ASK, or None to route by the map again."""
        kind, address = _redirect(error)
        if kind == "ASK":
            self.ask += 1
            return address
        if kind == "MOVED":
            self.moved += 1
            self._point(error)
            self._refresh_soon()
        else:
            await asyncio.sleep(_RETRY_PAUSE)
            if kind == "CLUSTERDOWN":
                await self.refresh()
        return None

    def _point(self, moved: ServerError) -> None:
        """Take a ``MOVED <slot> <address>`` at its word until the next map read confirms it
        (a node asked for the map may not have heard of the move yet)."""
        parts = moved.message.split()
        if len(parts) == 3 and parts[1].isdigit():
            self._by_address(parts[2])
            self._owners[int(parts[1])] = parts[2]

    def _refresh_soon(self) -> None:
        if not self._closed:
            task = asyncio.ensure_future(self.refresh())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _broadcast(self, args: tuple[Arg, ...]) -> Any:
        await self._node(None)  # at least one primary is reachable
        # Only the connected ones: a node down now answers NOSCRIPT later and gets its load then.
        live = [n for n in self.nodes.values() if n.is_connected]
        replies = await asyncio.gather(*(n.call(*args) for n in live))
        return replies[0]

    def call_many(self, commands: Sequence[Command]) -> Awaitable[list[Any]]:
        if not commands:
            raise ValueError("call_many needs at least one command")
        slots = [command_slot(command) for command in commands]  # all checked before sending
        return self._call_many(commands, slots)

    def call_durable(self, commands: Sequence[Command], wait: Command) -> Awaitable[list[Any]]:
        """:meth:`call_many`, with ``wait`` (``WAITAOF``) after the commands on every node's
        connection that took some of them (each in its flush's one wait, see
        :meth:`Connector.call_durable`), in every round: a command a redirection sends to
        another node is covered there. The replies, then the weakest wait answer."""
        if not commands:
            raise ValueError("call_durable needs at least one command")
        slots = [command_slot(command) for command in commands]
        return self._call_many(commands, slots, wait)

    async def _call_many(
        self, commands: Sequence[Command], slots: list[int | None], wait: Command | None = None
    ) -> list[Any]:
        replies: list[Any] = [None] * len(commands)
        waited: list[Any] = []  # each node's wait answer, each round
        todo = list(range(len(commands)))
        asking: dict[int, str] = {}
        moved = 0
        deadline = time.monotonic() + self.options.call_timeout
        while todo:
            groups: dict[Connector, list[int]] = {}
            for i in todo:
                if i in asking:
                    node = self._by_address(asking[i])
                    await node.connect()
                else:
                    node = await self._node(slots[i])
                groups.setdefault(node, []).append(i)
            sent = [
                self._send_group(node, commands, group, asking, wait)
                for node, group in groups.items()
            ]
            try:
                answers = await asyncio.gather(*sent)
            except WireError:
                self._refresh_soon()
                raise
            todo, asking, pause = [], {}, False
            last = moved > MAX_REDIRECTS or time.monotonic() >= deadline
            for group, answer in zip(groups.values(), answers, strict=True):
                if wait is not None:
                    waited.append(answer.pop())
                for i, reply in zip(group, answer, strict=True):
                    replies[i] = reply
                    if not isinstance(reply, ServerError) or reply.code not in _REDIRECTS:
                        continue
                    if last:
                        continue  # out of redirections or time: the error stays in place
                    todo.append(i)
                    kind, address = _redirect(reply)
                    if kind == "ASK":
                        self.ask += 1
                        asking[i] = address
                    elif kind == "MOVED":
                        self.moved += 1
                        moved += 1
                        self._point(reply)
                    else:
                        pause = True
            if any(i not in asking for i in todo):
                self._refresh_soon()
            if pause:
                await asyncio.sleep(_RETRY_PAUSE)
            todo.sort()
        if wait is not None:
            replies.append(functools.reduce(_lower, waited))
        return replies

    @staticmethod
    async def _send_group(
        node: Connector,
        commands: Sequence[Command],
        group: list[int],
        asking: dict[int, str],
        wait: Command | None = None,
    ) -> list[Any]:
        """The group's replies in order (then the wait's, when one is asked)."""
        if not any(i in asking for i in group):
            chosen = [commands[i] for i in group]
            if wait is not None:
                return await node.call_durable(chosen, wait)
            return await node.call_many(chosen)
        # ASK: each asked command rides behind its own ASKING, in one pipeline on that node.
        pipeline: list[Command] = []
        picks: list[int] = []
        for i in group:
            if i in asking:
                pipeline.append(("ASKING",))
            picks.append(len(pipeline))
            pipeline.append(commands[i])
        if wait is not None:
            replies = await node.call_durable(pipeline, wait)
            return [*(replies[p] for p in picks), replies[-1]]
        replies = await node.call_many(pipeline)
        return [replies[p] for p in picks]

    async def wait_replicas(self, key: str, replicas: int = 1, timeout: float = 1.0) -> int:
        """``WAIT`` on the connection that carries ``key``'s writes: how many replicas have
        acknowledged every write sent before it (within ``timeout`` seconds).

        Replication is asynchronous: a write is on a replica only once this says so, and a
        failover may lose any write it did not cover (docs/guides/cluster.md, "Failover").
        """
        node = await self._node(_slot(key))
        return int(await node.call("WAIT", replicas, max(1, round(timeout * 1000))))

    # -- dedicated connectors ------------------------------------------------------------------

    def dedicated_for(self, key: str, **kwargs: Any) -> Connector:
        """A connector of its own (a blocking read, a subscription) on the node owning ``key``;
        it follows the key's slot to another node after a migration or a failover."""
        kwargs.setdefault("version_fence", None)
        return KeyedConnector(self, key, **kwargs)


class KeyedConnector(Connector):
    """A connector bound to the primary of one key's slot: each (re)connect asks the router
    where that is, and a redirection or a lost socket re-reads the map and moves it there."""

    def __init__(self, router: ClusterRouter, key: str, **kwargs: Any) -> None:
        self.router = router
        self.key_slot = _slot(key)
        super().__init__(router.owner(self.key_slot), **kwargs)

    async def _open(self) -> None:
        self.options = self.router.owner(self.key_slot)
        try:
            await super()._open()
        except WireError:
            self.router._refresh_soon()
            raise

    async def call_blocking(self, timeout: float, *args: Arg) -> Any:
        try:
            return await super().call_blocking(timeout, *args)
        except ServerError as exc:
            # ASK and TRYAGAIN: the slot is mid-migration and still the old node's; the caller
            # parks a beat and asks again. MOVED and CLUSTERDOWN: it changed hands.
            if exc.code in ("MOVED", "CLUSTERDOWN"):
                await self.retarget()
            raise
        except WireError:
            if not self._closed:  # a read ended by our own close says nothing of the map
                self.router._refresh_soon()
            raise

    async def retarget(self, *, moved: bool = False) -> None:
        """Re-read the map; if the slot moved, drop the socket so the reconnect goes there.

        ``moved``: the server said the slot left this node (a sharded subscriber's
        ``sunsubscribe``), so keep re-reading, up to the call timeout, until the map agrees.
        """
        deadline = time.monotonic() + (self.options.call_timeout if moved else 0.0)
        while True:
            with contextlib.suppress(WireError):
                await self.router.refresh(force=moved)
            if self.router.owner(self.key_slot).address != self.address:
                break
            if time.monotonic() >= deadline or self._closed:
                return
            await asyncio.sleep(_RETRY_PAUSE)  # the other nodes learn the move by gossip
        proto = self._proto
        if proto is not None:
            self._drop(proto, ConnectError("slot moved", address=self.address), "slot moved")


def _lower(earlier: Any, reply: Any) -> Any:
    """The weaker of two wait answers (two nodes', or two rounds'): an error wins, else the
    lower counts."""
    if isinstance(earlier, BaseException):
        return earlier
    if isinstance(reply, BaseException):
        return reply
    if isinstance(earlier, int) and isinstance(reply, int):
        return min(earlier, reply)
    if isinstance(earlier, list) and isinstance(reply, list):
        return [min(a, b) for a, b in zip(earlier, reply, strict=True)]
    return reply


def _parse_slots(reply: Any) -> list[tuple[int, int, str, int]]:
    """``CLUSTER SLOTS`` rows → (first slot, last slot, primary host, primary port)."""
    rows = []
    for entry in reply:
        primary = entry[2]
        host = primary[0].decode() if isinstance(primary[0], bytes) else str(primary[0] or "")
        rows.append((int(entry[0]), int(entry[1]), host, int(primary[1])))
    return rows


async def is_cluster(options: ConnectionOptions) -> bool:
    """Whether the server at ``options`` runs with ``cluster-enabled yes``."""
    async with Connector(options, version_fence=None) as probe:
        info = await probe.call("INFO", "cluster")
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_enabled:1" in text


async def open_wire(seeds: Sequence[ConnectionOptions], pool_size: int = 1) -> Pool | ClusterRouter:
    """A connected wire for ``seeds``: a cluster router when several seeds are named or the
    server says ``cluster_enabled:1``, else a pool of ``pool_size`` connectors."""
    if len(seeds) > 1 or await is_cluster(seeds[0]):
        return await ClusterRouter(seeds).connect()
    return await Pool(seeds[0], pool_size).connect()

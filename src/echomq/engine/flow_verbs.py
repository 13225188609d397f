"""The flow verbs of a :class:`echomq.Queue`: admit a flow (one ``flow.lua`` call per queue it
touches, the parents' queues first), read what a parent's children left it, and relay this
queue's outbox to parents on other queues (part of every upkeep). Mixed into ``Queue``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from echomq.engine import ids as _ids
from echomq.engine.checks import count
from echomq.engine.flows import (
    EXPECTED_MS,
    RELAY_BATCH,
    Children,
    Flow,
    FlowIds,
    Plan,
    children_of,
    grouped,
    plan,
)
from echomq.engine.keys import Keyspace
from echomq.engine.scripts import ScriptRegistry
from echomq.engine.transitions import Engine
from echomq.errors import Unsupported
from echomq.tracing import FlowSending, Spans
from echomq.wire.codec import Codec
from echomq.wire.pool import Wire


class FlowVerbs:
    """Flows on a queue (mixed into :class:`Queue`)."""

    name: str
    wire: Wire
    keys: Keyspace
    codec: Codec
    scripts: ScriptRegistry
    engine: Engine
    _flow_engines: dict[str, Engine]
    minter: _ids.Minter
    _listened: Callable[[], bool]
    _emit: Callable[[Iterable[dict[str, Any]]], None]
    spans: Spans

    if TYPE_CHECKING:  # the Queue's (declared only: a definition here would hide it)

        async def _refuse_sharded_name(self) -> None:
            """Refuse a plain queue on a sharded queue's name (once per queue)."""

    def _engine_of(self, queue: str) -> Engine:
        """The engine of ``queue``: a queue's name, or a shard's tag (a sharded queue's nodes
        name their parent's shard by its tag, ``q~k…``, so the relay delivers to that shard)."""
        if queue == self.keys.tag:
            return self.engine
        engine = self._flow_engines.get(queue)
        if engine is None:
            keys = Keyspace.for_shard(queue)
            engine = Engine(self.wire, keys, self.scripts, self.engine.durability)
            self._flow_engines[queue] = engine
        return engine

    async def add_flow(self, flow: Flow, *, carries_context: bool = False) -> FlowIds:
        """Admit a flow rooted on this queue (a node naming another ``queue`` lives there): its
        parents wait (state ``waiting``) until every child settled, its leaves join their lanes.

        Atomic per queue: one script call writes all of a queue's nodes or none; the parents'
        queues are written first. Every node is checked before anything is written (at most
        1,000 nodes, 32 deep, 16 MiB of payloads in all). Admitting the same flow again (the
        same ids) answers ``duplicate`` and writes nothing. Returns every node's id, shaped
        like the flow. A parent reads its children's results with :meth:`children`.

        Traced as one producer span for the flow; ``carries_context`` (the task layer's: every
        payload a dict of its own making) adds a span per node, carried in its payload, and a
        parent's payload links its children's (docs/guides/observability.md).
        """
        tracer = self.spans.tracer()
        if tracer is None:
            return await self._add_flow(flow)
        with FlowSending(tracer, self.name, flow, carries_context) as sending:
            return sending.sent(await self._add_flow(flow))

    async def _add_flow(self, flow: Flow) -> FlowIds:
        if not self.minter.is_ready:
            await self.minter.ready()
        laid = plan(flow, self.name, self.codec, lambda: self.minter.mint("JOB"))
        await self._refuse_sharded_name()  # its own nodes would land on shard 0, unfenced
        await self._refuse_sharded(laid)
        await self._expect_parents(laid)
        written = False
        for queue, nodes in laid.writes.items():
            admitted, _existing = await self._engine_of(queue).flow([n.args() for n in nodes])
            written = written or admitted
            if admitted and queue == self.name and self._listened():
                self._emit(
                    {"event": "waiting" if n.children else "enqueued", "job": n.id} for n in nodes
                )
        ids = laid.ids
        if written:
            return ids
        return FlowIds(ids.id, ids.queue, ids.children, "duplicate")

    async def _refuse_sharded(self, laid: Plan) -> None:
        """Refuse, before anything is written, a flow with nodes on another queue that is
        sharded (one ``EXISTS`` of each other queue's directory, in one round trip): written from
        here they would land on its shard 0, unfenced. ``ShardedQueue.add_flow`` routes them to
        their lanes' shards, and takes nodes on queues of one slot (this one) too."""
        others = [name for name in laid.writes if name != self.name]
        if not others:
            return
        found = await self.wire.call_many([("EXISTS", Keyspace(name).directory) for name in others])
        for name, is_sharded in zip(others, found, strict=True):
            if is_sharded:
                raise Unsupported(
                    f"flow nodes on the sharded queue {name!r} are not added through the queue "
                    f"{self.name!r}: add the flow through {name!r} (ShardedQueue.connect or "
                    "open_queue), its nodes on this queue naming it (docs/concepts/shards.md)"
                )

    async def _expect_parents(self, laid: Plan) -> None:
        """Mark the parents that ``laid`` writes after some of their children (a flow nesting
        queues both ways, A -> B -> A, writes the grandchild on A before its parent on B): the
        relay keeps those children's entries until the parent is admitted, for up to 60 s, and
        drops an entry whose parent has no row and no mark at once (removed, drained ...)."""
        order = {queue: i for i, queue in enumerate(laid.writes)}
        late = {
            (node.parent_queue, node.parent)
            for queue, nodes in laid.writes.items()
            for node in nodes
            if node.parent_queue and order[node.parent_queue] > order[queue]
        }
        if late:
            await self.wire.call_many(
                [
                    ("SET", Keyspace.for_shard(queue).flow_expected(parent), "1", "PX", EXPECTED_MS)
                    for queue, parent in sorted(late)
                ]
            )

    async def children(self, id: str) -> Children:
        """What parent ``id``'s children left it so far: their ids in flow order, the results
        of those that completed, the errors of those that died (empty for no such parent)."""
        job_id = _ids.validate(id, "JOB", "job id")
        order, results, failed = await self.wire.call_many(
            [
                ("HGET", self.keys.job(job_id), "children"),
                ("HGETALL", self.keys.flow_results(job_id)),
                ("HGETALL", self.keys.flow_failed(job_id)),
            ]
        )
        return children_of(order, _pairs(results), _pairs(failed), self.codec)

    async def relay(self, limit: int = RELAY_BATCH) -> int:
        """Deliver up to ``limit`` entries of this queue's outbox (children whose parents live
        on other queues) to their parents' queues, then remove the delivered ones: at least
        once, each child counted once. Returns the entries removed. The upkeep runs it when
        the outbox holds entries."""
        entries = await self.wire.call("LRANGE", self.keys.outbox, 0, count(limit, "limit") - 1)
        done = await self._deliver(entries)
        await self._forget(done)
        return len(done)

    async def _deliver(self, entries: Sequence[bytes]) -> list[bytes]:
        """Deliver outbox ``entries``; the ones done with (delivered, or never deliverable)."""
        by_queue, done = grouped(entries)
        for queue, pairs in by_queue.items():
            codes = await self._engine_of(queue).flow_deliver([args for _, args in pairs])
            done += [entry for (entry, _), code in zip(pairs, codes, strict=True) if code != -1]
        return done

    async def _forget(self, entries: Sequence[bytes]) -> None:
        """Remove delivered entries from the outbox. LREM by value, not a trim of the head: two
        relays at once (two workers) each remove only what is there, never an undelivered one."""
        if entries:
            await self.wire.call_many([("LREM", self.keys.outbox, 1, e) for e in entries])


def _pairs(flat: Any) -> dict[bytes, bytes]:
    if isinstance(flat, dict):
        return flat
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}

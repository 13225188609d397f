"""The queue: admission, claim, settle and time — each a call of one Lua transition.

Every public call validates its arguments before any wire traffic and says what was wrong;
normal outcomes (duplicate, empty, rate-limited) are values. Durations are seconds (``float``).
"""

from __future__ import annotations

import logging
from typing import Any

from echomq.engine import ids as _ids
from echomq.engine.admin import Admin
from echomq.engine.admissions import Admissions
from echomq.engine.cancels import CancelHub, Cancels
from echomq.engine.checks import (
    MAX_ATTEMPTS,
    MAX_BATCH,
    MAX_LEASE,
    MAX_LIMIT,
    MAX_RESULT_TTL,
    count,
    ms,
)
from echomq.engine.durability import Durability
from echomq.engine.durability import validate as validate_durability
from echomq.engine.events import Subscription
from echomq.engine.flow_verbs import FlowVerbs
from echomq.engine.keys import Keyspace
from echomq.engine.planes import Planes

# Named here too: callers import the batch item from the queue that admits it.
from echomq.engine.producer import Item as Item
from echomq.engine.progress import Reports
from echomq.engine.publisher import Publisher
from echomq.engine.reads import Reads
from echomq.engine.results import Empty, Job, RateLimited, Reaped, Upkeep
from echomq.engine.scripts import ScriptRegistry
from echomq.engine.settles import Settles
from echomq.engine.shards import ShardMap
from echomq.engine.transitions import Claimed, Engine
from echomq.engine.waiters import WaiterHub
from echomq.errors import EchoMQError, InvalidArgument, QueueSharded
from echomq.tracing import Spans
from echomq.wire.codec import Codec, JsonCodec
from echomq.wire.pool import Wire
from echomq.wire.url import ConnectionOptions, seeds_from_url

DEFAULT_LEASE = 30.0

log = logging.getLogger("echomq.flows")


class Queue(Admissions, Settles, Reports, Cancels, FlowVerbs, Planes):
    """One named queue on a wire (a connector, a pool, or a cluster router).

    ``Queue.connect(url, name)`` opens and owns a pool; ``Queue(name, wire)`` shares yours.
    Claims and time live here, admission in :class:`Admissions` (admissions.py), the settles
    and waits in :class:`Settles` (settles.py), progress and logs in :class:`Reports`
    (progress.py), cancels in :class:`Cancels` (cancels.py), flows in :class:`FlowVerbs`
    (flow_verbs.py); the admin verbs and reads in :class:`Planes` (planes.py) are those of the
    admin and read planes the queue holds, on the same typed engine.

    ``result_ttl`` (seconds, 0 … 30 days): how long a completed job's row is kept, with its
    result, for :meth:`job` and :meth:`wait`; 0 (the default) deletes it at completion.

    ``durability`` (a :class:`Durability`, default None): every admission answers only once
    ``WAITAOF`` confirmed the fsyncs it asks (one wait per batch), and every settle too with
    its ``settles``; short of them, :class:`NotDurable` (docs/concepts/delivery.md).

    ``shard`` (a ``ShardMap`` and an index): this queue is that shard of a sharded queue, run by
    a :class:`~echomq.engine.sharded.ShardedQueue` (its keyspace, its admissions fenced by the
    map, its jobs marked with the index); None, the default, for a queue of one slot.
    """

    def __init__(
        self,
        name: str,
        wire: Wire,
        *,
        codec: Codec | None = None,
        minter: _ids.Minter | None = None,
        scripts: ScriptRegistry | None = None,
        events: bool = True,
        result_ttl: float = 0.0,
        durability: Durability | None = None,
        shard: tuple[ShardMap, int] | None = None,
    ) -> None:
        #: Whether this queue's name is known not to be a sharded queue's, or this is a shard
        #: of one (:meth:`_refuse_sharded_name`: read once, at connect or at first need).
        self._name_checked = shard is not None
        if shard is None:
            self.keys = Keyspace(name)
            self.placement: ShardMap | None = None
            #: Which shard of its sharded queue this queue is (0 for a queue of one slot).
            self.shard = 0
        else:
            placement, self.shard = shard
            self.keys = placement.keyspace(self.shard)
            #: The placement its admissions are fenced by (on a shard of a sharded queue).
            self.placement = placement
        #: ms a completed job's row is kept (0: deleted at completion), as complete.lua takes it.
        self.result_ttl_ms = ms(result_ttl, "result_ttl", most=MAX_RESULT_TTL)
        #: What an acknowledged write must have reached (None: the server's own fsync policy).
        self.durability = _durability(durability, wire)
        self.result_ttl = self.result_ttl_ms / 1000
        self.name = name
        self.wire = wire
        self.codec = codec or JsonCodec()
        # No minter given: one whose node is leased from the engine at the first mint, so
        # producers in many processes never mint the same id (docs/reference/bounds.md, "Ids").
        self.minter = minter if minter is not None else _ids.Minter.leased(wire)
        self._owns_minter = minter is None
        self.scripts = scripts or ScriptRegistry.from_package()
        #: The queue's transitions, one typed method per script.
        self.engine = Engine(wire, self.keys, self.scripts, self.durability)
        #: The engines of the other queues this queue's flows write nodes on, made once each
        #: (each asks the server about persistence once, when durable).
        self._flow_engines: dict[str, Engine] = {}
        self._reads = Reads(self.engine, self.keys, self.codec)
        self.publishes_events = events
        self._events = Publisher(wire, self.keys, enabled=events)
        self._admin = Admin(self.engine, self.keys, self._events)
        self._listened = self._events.listened
        self._emit = self._events.emit
        self._waiters = WaiterHub(wire, self.keys.done, self._reads.job)
        #: The queue's cancel subscription, shared by its consumers (opened by the first).
        self.cancel_hub = CancelHub(wire, self.keys)
        self._owns_wire = False
        #: Where this queue's producer spans go (OpenTelemetry, when the app set a provider).
        self.spans = Spans()

    @classmethod
    async def connect(
        cls,
        url: str | ConnectionOptions,
        name: str,
        *,
        pool_size: int = 1,
        **options: Any,
    ) -> Queue:
        """Open a pool to ``url`` and a queue on it; :meth:`close` closes the pool.

        One connector is the default: it pipelines without bound, and a wider pool measured
        slower within one process (docs/guides/consumers.md, "The pool"). A cluster (several seeds
        in ``url``, or a server with ``cluster_enabled:1``) gets a cluster router instead.
        A queue sharded over many slots opens with ``ShardedQueue.connect`` instead, or by
        its name alone with ``echomq.engine.connect_queue`` (docs/concepts/shards.md): on a
        sharded queue's name this raises :class:`QueueSharded` (one read of its directory).
        """
        from echomq.wire.cluster import open_wire  # the router builds on the pool: imported late

        Keyspace(name)  # validates before connecting
        if "result_ttl" in options:
            ms(options["result_ttl"], "result_ttl", most=MAX_RESULT_TTL)
        seeds = [url] if isinstance(url, ConnectionOptions) else seeds_from_url(url)
        _durability(options.get("durability"), seeds[0])
        wire = await open_wire(seeds, pool_size)
        try:
            queue = cls(name, wire, **options)
            await queue._refuse_sharded_name()
            await queue.engine.check_persistence()  # a durability the server cannot give
        except BaseException:
            await wire.close()
            raise
        queue._owns_wire = True
        return queue

    async def _refuse_sharded_name(self) -> None:
        """Raise :class:`QueueSharded` when this queue of one slot bears the name of a sharded
        queue (one read of its directory's ``count``, once: at :meth:`connect`, else at the
        first flow or reassign; enqueues and claims are refused by the engine itself): it
        would be that queue's shard 0 alone, unfenced. A shard of a sharded queue passes."""
        if self._name_checked:
            return
        shards = await self.wire.call("HGET", Keyspace(self.name).directory, "count")
        if shards is not None:
            raise QueueSharded.of(self.name, int(shards))
        self._name_checked = True

    async def close(self) -> None:
        """Give back the minter's node lease (when the queue made its minter) and close the
        wire (when :meth:`connect` opened it). Waits in progress raise :class:`Closed`."""
        await self._waiters.close()
        await self.cancel_hub.close()
        if self._owns_minter:
            await self.minter.release()
        if self._owns_wire:
            await self.wire.close()

    def take_wire(self) -> None:
        """From now on :meth:`close` closes the wire too, as for the pool :meth:`connect`
        opened: for an opener that made the wire for this queue (``connect_queue``)."""
        self._owns_wire = True

    async def __aenter__(self) -> Queue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    @property
    def wake_keys(self) -> tuple[str, ...]:
        """The wake lists a consumer parks on: one for a queue, one per shard for a sharded
        queue (:class:`~echomq.consumers.wake.Wake` blocks on them all)."""
        return (self.keys.wake,)

    def keys_of(self, lane: str) -> Keyspace:
        """The keyspace that holds ``lane``'s keys (a job's row, a dedup key): this queue's own
        (a sharded queue's: the lane's shard's)."""
        return self.keys

    def publish(self, event: str, job: str, **extra: str | int | float | bool | None) -> None:
        """Publish an application event (say ``scored``) on this queue's event channel.

        Fire-and-forget and at most once, like the lifecycle events: it goes out only while
        someone subscribes (checked at most once a second), and a failure is not raised.
        """
        if not isinstance(event, str) or not event:
            raise InvalidArgument("event", event, "must be a non-empty name")
        job_id = _ids.validate(job, argument="job id")
        if self._listened():
            self._emit([{"event": event, "job": job_id, **extra}])

    def subscribe(self) -> Subscription:
        """A subscriber of this queue's lifecycle events, on a connection of its own."""
        return self._events.subscribe()

    # -- claim ---------------------------------------------------------------------------------

    async def claim_some(
        self, n: int, lease: float = DEFAULT_LEASE, *, one_lane: bool = False
    ) -> tuple[list[Job], bool] | Empty | RateLimited:
        """:meth:`claim_batch`, plus whether some lane was still serviceable afterwards (a
        consumer that sees ``False`` parks instead of spending a claim to learn it)."""
        lease_ms = ms(lease, "lease", positive=True, most=MAX_LEASE)
        if type(one_lane) is not bool:
            raise InvalidArgument("one_lane", one_lane, "must be True or False")
        outcome = await self._leased(lease_ms, count(n, "n", maximum=MAX_BATCH), one_lane)
        return (outcome[0], outcome[1].more) if isinstance(outcome, tuple) else outcome

    async def _leased(
        self, lease_ms: int, n: int, one_lane: bool, load: bool = False
    ) -> tuple[list[Job], Claimed] | Empty | RateLimited:
        """One claim, its arguments checked: the jobs and the reply they came in (``load``: a
        sharded queue's claim, whose reply carries the shard's load, ``Claimed.load``; a shard
        always asks it, since a shard refuses a claim that does not: QueueSharded)."""
        load = load or self.placement is not None
        claimed = await self.engine.claim(lease_ms, n, one_lane, load)
        if claimed is None:
            return Empty()
        if isinstance(claimed, int):
            return RateLimited(claimed / 1000) if claimed > 0 else Empty(-claimed / 1000)
        jobs = claimed.jobs(self.codec.decode, self.name, self.shard)
        if self._listened():
            self._emit({"event": "active", "job": j.id, "attempts": j.attempts} for j in jobs)
        return jobs, claimed

    async def claim(self, lease: float = DEFAULT_LEASE) -> Job | Empty | RateLimited:
        """Lease the next job by fair rotation of the lanes, or say why there is none."""
        outcome = await self.claim_some(1, lease)
        return outcome[0][0] if isinstance(outcome, tuple) else outcome

    async def claim_batch(
        self, n: int, lease: float = DEFAULT_LEASE, *, one_lane: bool = False
    ) -> list[Job] | Empty | RateLimited:
        """Lease up to ``n`` jobs on one lease, walking the ring as ``n`` single claims would:
        each lane gives what is left of its turn (weights hold), clamped to every headroom.
        ``one_lane``: every job of one lane instead — the head lane whose turn it is gives up to
        ``n`` (clamped to its ceiling and rates), as one claim of its turn; then the ring moves
        on as after a single claim (a lane of weight w gives w such batches per visit)."""
        outcome = await self.claim_some(n, lease, one_lane=one_lane)
        return outcome[0] if isinstance(outcome, tuple) else outcome

    # -- time ----------------------------------------------------------------------------------

    async def promote(self, limit: int = 1000) -> int:
        """Move due scheduled jobs back to their own lanes; return rate-limited lanes whose
        window ended to the ring. Returns the number of jobs moved."""
        moved, _lanes = await self.engine.promote(count(limit, "limit", maximum=MAX_LIMIT))
        return moved

    async def upkeep(self, limit: int = 1000, max_stalled: int = 3) -> Upkeep:
        """The beat's work in one script: :meth:`promote`, then :meth:`reap`; then, when this
        queue's flow outbox holds entries, :meth:`relay` (here, because a child's completion
        is followed by its queue's upkeep whoever serves the parent's queue)."""
        self.relay_due = False  # the tick below reads the outbox
        tick = await self.engine.tick(
            count(limit, "limit", maximum=MAX_LIMIT),
            min(limit, 100),
            count(max_stalled, "max_stalled", maximum=MAX_ATTEMPTS),
        )
        next_due = None if tick.next_due_ms < 0 else tick.next_due_ms / 1000
        if tick.outbox:
            try:
                relayed = await self.relay()
            except EchoMQError as exc:  # a parent's shard unreachable: the entries wait
                log.warning("relaying the flow outbox of %s failed: %s", self.name, exc)
                relayed = 0
            if relayed < tick.outbox:
                # Entries left (more than one pass, a parent not admitted yet): soon again.
                next_due = 0.5 if next_due is None else min(next_due, 0.5)
        result = Upkeep(tick.moved, tick.lanes, Reaped(tick.recovered, tick.dead), next_due)
        if result.reaped.recovered or result.reaped.dead:
            self._emit_reaped(result.reaped)
        return result

    async def reap(self, limit: int = 100, max_stalled: int = 3) -> Reaped:
        """Return expired leases to their lanes; dead-letter jobs that stalled ``max_stalled``
        times (``last_error`` = ``stalled``)."""
        recovered, dead = await self.engine.reap(
            count(limit, "limit", maximum=MAX_LIMIT),
            count(max_stalled, "max_stalled", maximum=MAX_ATTEMPTS),
        )
        result = Reaped(recovered, dead)
        self._emit_reaped(result)
        return result

    def _emit_reaped(self, reaped: Reaped) -> None:
        if self._listened():
            self._emit(
                [{"event": "stalled", "job": i} for i in reaped.recovered]
                + [{"event": "dead", "job": i, "error": "stalled"} for i in reaped.dead]
            )


def _durability(durability: Any, wire: Wire | ConnectionOptions) -> Durability | None:
    """A queue's ``durability``, checked against the wire: a ``WAITAOF`` must answer before
    the connector's watchdog gives up on the socket (its ``call_timeout``)."""
    options = wire if isinstance(wire, ConnectionOptions) else wire.options
    return validate_durability(durability, options.call_timeout)

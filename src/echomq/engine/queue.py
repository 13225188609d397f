"""The queue: admission, claim, settle and time — each a call of one Lua transition.

Every public call validates its arguments before any wire traffic and says what was wrong;
normal outcomes (duplicate, empty, rate-limited) are values. Durations are seconds (``float``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from echomq.engine import ids as _ids
from echomq.engine.admin import Admin
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
from echomq.engine.eta import Eta
from echomq.engine.events import Subscription
from echomq.engine.flow_verbs import FlowVerbs
from echomq.engine.keys import Keyspace
from echomq.engine.lanes import Lane
from echomq.engine.options import (
    DEFAULT_OPTIONS,
    Admission,
    JobOptions,
    admission,
    lane_alias,
    options_of,
    when_run_at,
)
from echomq.engine.policies import DEFAULT_MODE, FairBy, Fairness, Policies, Policy, RateMode
from echomq.engine.producer import Batch, Item, admission_verdict
from echomq.engine.progress import Reports
from echomq.engine.publisher import Publisher
from echomq.engine.reads import Reads
from echomq.engine.results import (
    Counts,
    Empty,
    Job,
    JobInfo,
    JobState,
    LaneInfo,
    RateLimited,
    Reaped,
    Upkeep,
    Verdict,
)
from echomq.engine.scripts import ScriptRegistry
from echomq.engine.settles import Settles
from echomq.engine.shards import ShardMap
from echomq.engine.transitions import Claimed, Engine
from echomq.engine.waiters import WaiterHub
from echomq.errors import EchoMQError, InvalidArgument
from echomq.tracing import Sending, Spans, carriers_of, sending_many
from echomq.wire.codec import Codec, JsonCodec
from echomq.wire.pool import Wire
from echomq.wire.url import ConnectionOptions, seeds_from_url

DEFAULT_LEASE = 30.0

log = logging.getLogger("echomq.flows")


class Queue(Settles, Reports, Cancels, FlowVerbs):
    """One named queue on a wire (a connector, a pool, or a cluster router).

    ``Queue.connect(url, name)`` opens and owns a pool; ``Queue(name, wire)`` shares yours.
    Admission and claims live here, the settles and waits in :class:`Settles` (settles.py),
    progress and logs in :class:`Reports` (progress.py), cancels in :class:`Cancels`
    (cancels.py), flows in :class:`FlowVerbs` (flow_verbs.py);
    the admin verbs and reads are those of the admin and read planes the queue holds, on the
    same typed engine.

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
        A queue sharded over many slots opens with ``ShardedQueue.connect`` instead
        (docs/concepts/shards.md).
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
            await queue.engine.check_persistence()  # a durability the server cannot give
        except BaseException:
            await wire.close()
            raise
        queue._owns_wire = True
        return queue

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

    # -- admission -----------------------------------------------------------------------------

    def _mint(self) -> str:
        return self.minter.mint("JOB")

    async def admit(
        self, payload: Any, options: JobOptions = DEFAULT_OPTIONS, *, carries_context: bool = False
    ) -> Verdict:
        """Admit one job with its :class:`JobOptions` (the one path every enqueue takes:
        ``enqueue``, ``enqueue_in``, ``enqueue_at`` and the task layer). Idempotent by id and
        dedup key; a refused option raises :class:`InvalidArgument` naming it, before any write.

        Traced (a producer span) when the application set an OpenTelemetry tracer provider;
        ``carries_context``: ``payload`` is a dict of the caller's own making (the task layer's)
        and takes the span's W3C context, so the worker's span is its child."""
        tracer = self.spans.tracer()
        if tracer is None:
            return await self._admit(payload, options)
        carriers = (payload,) if carries_context else ()
        with Sending(tracer, self.name, options.lane, carriers) as sending:
            return sending.sent(await self._admit(payload, options))

    async def _admit(self, payload: Any, options: JobOptions, checked: bool = False) -> Verdict:
        """``checked``: on a shard, the fence says the item's dedup key was looked for on the
        source of its lane, held here for a move (docs/concepts/shards.md)."""
        if options.id is None and not self.minter.is_ready:
            await self.minter.ready()
        item = admission(self.codec, self._mint, payload, options)
        fence = None if self.placement is None else self.placement.fence((item.group,))
        if fence is not None and checked:
            fence = fence._replace(checked=True)
        code, job_id, state = await self.engine.enqueue_one(item, fence)
        verdict = admission_verdict(code, job_id, state)
        if code and self._listened():
            self._emit([{"event": verdict.kind, "job": job_id, "group": item.group}])
        return verdict

    async def enqueue(
        self,
        payload: Any,
        *,
        lane: str | None = None,
        id: str | None = None,
        dedup_key: str | None = None,
        dedup_ttl: float | None = None,
        dedup_from: str = "enqueue",
        result_ttl: float | None = None,
        priority: int | None = None,
        cost: int | None = None,
        group: str | None = None,
    ) -> Verdict:
        """Admit a job to its ``lane`` (default lane ``_``). Idempotent by id and dedup key.

        ``id`` must be a ``JOB`` branded id (minted when omitted). A ``dedup_key`` maps to the
        job for ``dedup_ttl`` seconds from now, whatever becomes of the job (completed, removed,
        drained); without ``dedup_ttl``, for as long as the job's row lives (a kept result too)
        and not past its death. ``dedup_from="finish"`` counts ``dedup_ttl`` from the job's end
        instead (completed, dead, cancelled or removed): "once per user for an hour after it
        ran". ``result_ttl`` (seconds, 0 … 30 days) keeps this job's completed row that long
        instead of the completing queue's ``result_ttl`` (docs/guides/results.md).
        ``priority`` (0..9, default 5) is the job's band: a more urgent band is served first
        (docs/guides/priorities-costs-cooling.md); ``cost`` (1..1000, default 1) the units it
        spends of its lane's and queue's budgets. ``group=`` is the deprecated name of
        ``lane=``. The same as :meth:`admit` with these options.
        """
        if group is not None:
            lane = lane_alias(lane, group)
        options = JobOptions(
            lane,
            id,
            dedup_key,
            dedup_ttl,
            dedup_from,
            None,
            None,
            result_ttl,
            priority=priority,
            cost=cost,
        )
        return await self.admit(payload, options)

    async def enqueue_in(self, delay: float, payload: Any, **options: Any) -> Verdict:
        """Admit a job that becomes claimable ``delay`` seconds from now (server clock);
        ``options`` are :meth:`enqueue`'s."""
        return await self.admit(payload, options_of(options, delay=delay))

    async def enqueue_at(self, when: float, payload: Any, **options: Any) -> Verdict:
        """Admit a job that becomes claimable at ``when`` (Unix seconds; a past ``when`` runs
        now). At most 10 years ahead; a millisecond timestamp is refused, not read as seconds."""
        when_run_at(when)  # refused as ``when``, the argument's name here
        return await self.admit(payload, options_of(options, at=when))

    async def enqueue_many(self, items: Iterable[Item | Any]) -> list[Verdict]:
        """Admit many jobs, one script call per chunk of 100, the chunks pipelined; one verdict
        per item, in input order.

        Each item is atomic and idempotent; the batch is not a transaction. An item that fails
        validation gets an ``error`` verdict and is not sent; the others are. When the
        connection drops mid-batch, the answered chunks keep their verdicts and the rest answer
        ``unknown`` (nothing is raised): send those again with their verdict's ``id``.
        """
        if not self.minter.is_ready:
            await self.minter.ready()
        tracer = self.spans.tracer()
        if tracer is None:
            return await self._send(Batch.plan(items, self.codec, self._mint))
        items = carriers_of(items)
        with sending_many(tracer, self.name, items, False) as sending:
            return sending.sent_many(await self._send(Batch.plan(items, self.codec, self._mint)))

    async def admit_many(
        self, jobs: Iterable[tuple[Any, JobOptions]], *, carries_context: bool = False
    ) -> list[Verdict]:
        """:meth:`enqueue_many` for ``(payload, options)`` pairs: the batch form of
        :meth:`admit` (the task layer's path), with the same verdicts; one producer span for
        the batch (``carries_context`` as :meth:`admit`'s, for every payload)."""
        if not self.minter.is_ready:
            await self.minter.ready()
        tracer = self.spans.tracer()
        if tracer is None:
            return await self._send(Batch.pairs(jobs, self.codec, self._mint))
        jobs = carriers_of(jobs)
        with sending_many(tracer, self.name, jobs, carries_context) as sending:
            return sending.sent_many(await self._send(Batch.pairs(jobs, self.codec, self._mint)))

    async def _send(self, batch: Batch) -> list[Verdict]:
        """A planned batch sent: its verdicts in input order."""
        admissions = batch.admissions
        replies = await self._enqueue_admissions(admissions) if admissions else []
        verdicts = batch.settle(replies)
        if self._listened():
            self._emit(
                {"event": v.kind, "job": v.id}
                for v in verdicts
                if v.kind in ("enqueued", "scheduled")
            )
        return verdicts

    async def _enqueue_admissions(
        self, admissions: list[Admission], checked: bool = False
    ) -> list[Any]:
        """The script's reply per item (a shard's call fenced by its placement; ``checked``:
        as :meth:`_admit`'s)."""
        fence = None
        if self.placement is not None:
            fence = self.placement.fence(item.group for item in admissions)._replace(
                checked=checked
            )
        return await self.engine.enqueue(admissions, fence)

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
        sharded queue's claim, whose reply carries the shard's load, ``Claimed.load``)."""
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

    # -- lanes, settings and cleanup (the admin plane) -----------------------------------------

    def lane(self, name: str) -> Lane:
        """The control handle of one lane (validates its name)."""
        return self._admin.lane(name)

    async def pause(self) -> None:
        """Pause the whole queue: claims answer empty, admission continues."""
        await self._admin.pause()

    async def resume(self) -> None:
        """Resume a paused queue."""
        await self._admin.resume()

    async def concurrency(self, ceiling: int | None) -> bool:
        """At most ``ceiling`` jobs of the queue leased at once; ``None`` removes the ceiling.
        False: it held that value already (nothing written)."""
        return await self._admin.concurrency(ceiling)

    async def rate_limit(
        self, max: int | None, window: float | None = None, *, mode: RateMode = DEFAULT_MODE
    ) -> bool:
        """At most ``max`` claims per ``window`` seconds across every worker; ``None`` removes it.

        ``mode="smooth"`` (the default): no ``window`` seconds ever hold more than ``max``
        claims; ``"fixed"``: back-to-back windows of ``max`` each (docs/concepts/gates.md). The
        check and the spend happen inside the claim script, so every worker on every host shares
        the one budget. Takes effect at once, without restarting workers. Idempotent: the rate
        in force set again changes nothing (False); a change carries the window in flight on.
        """
        return await self._admin.rate_limit(max, window, mode)

    async def fairness(self, by: FairBy = "count", *, quantum: float | None = None) -> bool:
        """How a lane's turn on the ring is measured, for every worker at once.

        ``"count"`` (the default): a lane of weight w is served w claims per visit, whatever
        its jobs cost. ``"cost"``: fairness by work in units, deficit round robin: a visit
        grants ``quantum`` x weight units (default: the dearest ``cost`` the queue admitted)
        and the lane is served while its credit lasts, each job charged its ``cost``.
        ``"time"``: the same in run time: each job is charged its lane's average run time
        when claimed and set right when the job ends: by the time its handler ran (the
        consumer's measure, carried by the complete), else by the time it held its lease on
        the server clock; ``quantum`` in seconds (default 0.1). Lanes with 10x heavier jobs then
        get the same worker time as the others, not 10x more
        (docs/guides/priorities-costs-cooling.md, "Fairness by work"). A change starts every
        lane's share afresh. False: it held that setting already (nothing written).
        """
        return await self._admin.fairness(by, quantum)

    async def apply_policies(
        self,
        policies: Mapping[str, Policy] | None = None,
        /,
        *,
        default: Policy | None = None,
        **lanes: Policy,
    ) -> int:
        """State the lanes' settings at once: ``default`` for every lane not named, and each
        named lane's own (by keyword, or in the ``policies`` mapping for any lane name).

        Stored in the engine and read by the claim itself: a lane with no own setting follows
        the default, with no write per lane. Idempotent, so every process applies them at start:
        the policies in force applied again change nothing (0) and grant no fresh budget. Lanes
        named before and not now follow the default again. The number of settings changed.
        """
        return await self._admin.apply_policies(policies, default, lanes)

    async def policies(self) -> Policies:
        """The lane policies in force: the default and the named lanes'."""
        return await self._reads.policies()

    async def ordered(self, on: bool) -> None:
        """Serve each lane one job at a time, in mint order (``on=True``), or not (``False``).

        Queue-wide and stored in the engine, so every producer and consumer of the queue, in
        any process, agrees. While on, a claimed job holds its lane until it completes, goes
        dead or is removed: retried, deferred or reaped, it keeps the lane's head, and no later
        job of the lane is claimed meanwhile. Other lanes are served as before. Switch it on
        before the queue carries work: jobs leased before hold nothing. Switching it off
        releases every held lane at once (docs/guides/ordered-lanes.md).
        """
        await self._admin.ordered(on)

    async def drain(self, *, schedule: bool = False, results: bool = False) -> int:
        """Delete every pending job (and scheduled ones with ``schedule``, kept results of
        completed jobs with ``results``); leased and dead jobs survive."""
        return await self._admin.drain(schedule, results)

    async def obliterate(self, *, force: bool = False) -> None:
        """Delete every key of the queue. Refuses unless paused, and with leased jobs unless
        ``force``. Runs in bounded steps so the server never blocks for long."""
        await self._admin.obliterate(force)

    async def remove(self, id: str) -> bool:
        """Delete a job that is not leased; False when it does not exist. Raises
        :class:`LockedError` for a leased job."""
        return await self._admin.remove(id)

    async def reassign(self, id: str, lane: str | None = None, *, group: str | None = None) -> bool:
        """Move a pending job to another ``lane`` (``group=``: its deprecated name). False when
        the job does not exist."""
        lane = lane_alias(lane, group)
        if lane is None:
            raise InvalidArgument("lane", lane, "name the lane to move the job to")
        return await self._admin.reassign(id, lane)

    async def reprocess(self, id: str) -> bool:
        """Return a dead job to its lane with a fresh failure budget. False when it is gone;
        :class:`StateError` when it is not dead."""
        return await self._admin.reprocess(id)

    # -- reads (the read plane) ----------------------------------------------------------------

    async def counts(self) -> Counts:
        """Jobs per state, the terminal counters, and the lanes that exist / are on the ring."""
        return await self._reads.counts()

    async def lanes(self, names: Sequence[str] = ()) -> list[LaneInfo]:
        """State of the lanes ``names``, or of every lane that holds work or settings."""
        return await self._reads.lanes(names)

    async def ring(self) -> list[str]:
        """The rota: serviceable lanes in the order they will be served."""
        return await self._reads.ring()

    async def is_paused(self) -> bool:
        """Whether the whole queue is paused."""
        return await self._reads.is_paused()

    async def has_work(self, scheduled_within: float = 0.0) -> bool:
        """Whether a worker still has something to get to here, read in one atomic step: a
        leased job, a flow entry to relay, a job pending in a lane that is not paused (on a
        queue that is not paused), or a job scheduled to fall due within ``scheduled_within``
        seconds (server clock). What a ``--burst`` worker waits for before it exits."""
        return await self._reads.has_work(scheduled_within)

    async def is_ordered(self) -> bool:
        """Whether the queue serves each lane one job at a time, in mint order (:meth:`ordered`)."""
        return await self._reads.is_ordered()

    async def fairness_in_force(self) -> Fairness:
        """How the queue measures a lane's turn now (:meth:`fairness` sets it)."""
        return await self._reads.fairness()

    async def rate_limit_ttl(self) -> float:
        """Seconds until the queue's rate window admits claims again (0 = it admits now)."""
        return await self._reads.rate_limit_ttl()

    async def job(self, id: str) -> JobInfo | None:
        """A job's row, or None when no such job exists (a completed job's row exists only
        while the queue's ``result_ttl`` keeps it)."""
        return await self._reads.job(id)

    async def position(self, id: str) -> Eta | None:
        """Where pending job ``id`` stands: its place in its lane (``position`` jobs ahead)
        and its estimated wait until a claim (:class:`~echomq.engine.eta.Eta`, the model and
        its measured error in docs/guides/where-a-tenant-stands.md); None when it waits in no
        lane (unknown, scheduled, leased or finished). One read, O(lanes with work)."""
        return await self._reads.position(id)

    async def etas(self) -> dict[str, Eta]:
        """Every lane with pending work: where a job enqueued on it now would stand
        (``lane.eta()`` for each, from one read and one run of the model)."""
        return await self._reads.etas()

    async def state(self, id: str) -> JobState:
        """``pending`` (waiting in its lane), ``active``, ``scheduled``, ``completed`` (a kept
        result), ``dead``, ``cancelled`` (kept like a result) or ``absent``."""
        return await self._reads.state(id)

    async def dead(self, limit: int = 100) -> list[JobInfo]:
        """Dead-lettered jobs, oldest death first."""
        return await self._reads.dead(limit)


def _durability(durability: Any, wire: Wire | ConnectionOptions) -> Durability | None:
    """A queue's ``durability``, checked against the wire: a ``WAITAOF`` must answer before
    the connector's watchdog gives up on the socket (its ``call_timeout``)."""
    options = wire if isinstance(wire, ConnectionOptions) else wire.options
    return validate_durability(durability, options.call_timeout)

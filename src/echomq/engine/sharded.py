"""One logical queue over many slots: S shards, each a complete queue under a hash tag of its
own, with every lane wholly on one shard (docs/concepts/shards.md).

A :class:`ShardedQueue` is a :class:`Queue` whose own keyspace is shard 0 (an unsharded queue
*is* shard 0 of a sharded one) and which holds one shard queue per shard. What it adds:

* **placement**: an admission goes to its lane's shard (``ShardMap.shard_of``), fenced there by
  the map's epoch and the lane's slot (enqueue.lua refuses a lane the shard does not own);
  ``enqueue_many`` sends each shard its items at once, verdicts back in the caller's order;
* **claims** visit the shards by stride scheduling over their active weights
  (:class:`ShardStride`): each shard's ring shares its claims by lane weight, and the stride
  shares the claims among shards by the weights on their rings, so every lane gets what one
  ring would give; each shard's load is read every ``refresh`` seconds (one pipelined read
  per shard) and a claim that finds a shard empty marks it idle at once;
* **settles** go to the shard that leased the job (``Job.shard``); a job named by id alone is
  found by the shard that leased it here, else by one read of every shard;
* **reads** are every shard's, summed or merged; **admin** writes every shard.

What a sharded queue does not do yet is refused by name (:class:`Unsupported`), never done on
shard 0 alone: queue-wide concurrency and rate (quotas split per shard, a later landing), flows,
lifecycle event subscriptions, moving a lane and changing the shard count.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any, Final, Literal, TypeVar

from echomq.engine import ids as _ids
from echomq.engine.cancels import CancelHub
from echomq.engine.checks import MAX_BATCH, MAX_LEASE, count, ms
from echomq.engine.events import Subscription
from echomq.engine.flows import Flow, FlowIds
from echomq.engine.keys import DEFAULT_GROUP, Keyspace, validate_group
from echomq.engine.lanes import Lane
from echomq.engine.options import DEFAULT_OPTIONS, PRIORITY_DEFAULT, JobOptions
from echomq.engine.policies import DEFAULT_MODE, FairBy, Policies, Policy, RateMode
from echomq.engine.producer import Batch
from echomq.engine.queue import DEFAULT_LEASE, Queue
from echomq.engine.results import (
    Completed,
    CompleteOutcome,
    Counts,
    Empty,
    Failed,
    Job,
    JobInfo,
    JobState,
    LaneInfo,
    RateLimited,
    Reaped,
    RetryOutcome,
    Upkeep,
    Verdict,
)
from echomq.engine.shard_schedule import IDLE, MAX_SHARDS, ShardLoad, ShardStride
from echomq.engine.shards import ShardMap
from echomq.engine.transitions import Success
from echomq.errors import InvalidArgument, Unsupported
from echomq.wire.pool import Wire
from echomq.wire.url import ConnectionOptions, seeds_from_url

#: Seconds between two reads of every shard's load (a worker hears of a shard it is not
#: visiting that often).
REFRESH: Final = 0.1
#: Leased job ids remembered with their shard, for settles by id (beyond it, the oldest go:
#: a settle by an id forgotten reads every shard once to find it).
HELD_KEPT: Final = 65_536

_T = TypeVar("_T")


class ShardedQueue(Queue):
    """One logical queue over ``placement.shards`` shards (docs/concepts/shards.md).

    Open one with :meth:`connect` (or :meth:`open` on a wire of yours): the first opens the
    queue's directory and shards, every later one reads them. Every promise about a lane —
    its order, ceiling, rate, weight, pause, cooling, priority bands — is its shard's, exact;
    across shards the claims follow the lanes' weights (the error bound in the design page).
    """

    def __init__(
        self, placement: ShardMap, wire: Wire, *, refresh: float = REFRESH, **options: Any
    ) -> None:
        super().__init__(placement.queue, wire, shard=(placement, 0), **options)
        shared = {**options, "minter": self.minter, "scripts": self.scripts}
        #: The shards, in order: shard 0 is this queue itself.
        others = [
            Queue(placement.queue, wire, shard=(placement, k), **shared)
            for k in range(1, placement.shards)
        ]
        self.shards: tuple[Queue, ...] = (self, *others)
        for shard in self.shards[1:]:
            shard.spans = self.spans  # the app's tracer provider reaches every shard's sends
        #: Every shard's cancel subscription, for the consumers of this queue.
        self.cancel_hub = ShardedCancelHub(self.shards)
        self.refresh = ms(refresh, "refresh") / 1000  # 0: read every claim
        self._stride = ShardStride(placement.shards, offset=id(self) // 16)
        self._loads_at = -1.0  # loop time of the last read of every shard's load
        self._held: dict[str, int] = {}  # leased job id -> its shard, for settles by id
        self._closes_wire = False  # connect opened it
        self._dues: list[int | None] = [None] * placement.shards  # first benched lane's return
        self._now_ms = 0  # server ms of the last read of the loads

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        url: str | ConnectionOptions,
        name: str,
        *,
        pool_size: int = 1,
        shards: int | None = None,
        **options: Any,
    ) -> ShardedQueue:
        """Open a pool (or a cluster router) to ``url`` and the sharded queue ``name`` of
        ``shards`` shards on it (made at the first open); :meth:`close` closes the wire.
        ``Queue.connect(url, name, shards=S)`` is the same."""
        if shards is None:
            raise InvalidArgument("shards", shards, "a sharded queue needs its shard count")
        from echomq.wire.cluster import open_wire  # the router builds on the pool: imported late

        Keyspace(name)  # validates before connecting
        _check_shards(shards)
        seeds = [url] if isinstance(url, ConnectionOptions) else seeds_from_url(url)
        wire = await open_wire(seeds, pool_size)
        try:
            queue = await cls.open(name, wire, shards=shards, **options)
            await queue.engine.check_persistence()
        except BaseException:
            await wire.close()
            raise
        queue._closes_wire = True
        return queue

    @classmethod
    async def open(cls, name: str, wire: Wire, *, shards: int, **options: Any) -> ShardedQueue:
        """The sharded queue ``name`` on ``wire``: its directory read, or, the first time, its
        shards made (their tags spread over a cluster's primaries) and the directory written.
        ``shards`` must be what the directory holds (changing it is a later landing)."""
        keys = Keyspace(name)
        _check_shards(shards)
        placement = await _read_map(wire, keys)
        if placement is None:
            placement = ShardMap.create(name, shards, _slot_owners(wire))
            await _refuse_a_queue_with_work(wire, keys)
            for k in range(placement.shards):
                await wire.call_many(placement.fence_commands(k))
            # Two first opens at once compute the same map (the choice is deterministic for
            # one cluster map), so their writes agree; the directory goes last, so a reader
            # that finds it finds every shard made.
            directory = [part for pair in placement.to_directory().items() for part in pair]
            await wire.call("HSET", keys.directory, *directory)
        elif placement.shards != shards:
            raise InvalidArgument(
                "shards",
                shards,
                f"queue {name!r} has {placement.shards} shards; changing the count is not "
                "built yet (docs/concepts/shards.md, 'Changing S')",
            )
        return cls(placement, wire, **options)

    @property
    def placement_map(self) -> ShardMap:
        """Where every lane lives: the tags, the lane-slot table, the overrides, the epoch."""
        assert self.placement is not None
        return self.placement

    @property
    def wake_keys(self) -> tuple[str, ...]:
        """Every shard's wake list: a parked consumer wakes on a token from any of them."""
        return tuple(shard.keys.wake for shard in self.shards)

    async def close(self) -> None:
        """Close every shard's subscriptions, then this queue (its minter, its wire)."""
        for shard in self.shards[1:]:
            await shard.close()
        await super().close()  # its cancel hub closes every shard's
        if self._closes_wire:
            await self.wire.close()

    def __repr__(self) -> str:
        return f"ShardedQueue({self.name!r}, shards={len(self.shards)})"

    def _shard_of_lane(self, lane: str) -> Queue:
        return self.shards[self.placement_map.shard_of(lane)]

    # -- admission -----------------------------------------------------------------------------

    async def admit(
        self, payload: Any, options: JobOptions = DEFAULT_OPTIONS, *, carries_context: bool = False
    ) -> Verdict:
        """:meth:`Queue.admit` on the shard of the job's lane."""
        lane = DEFAULT_GROUP if options.lane is None else validate_group(options.lane)
        shard = self._shard_of_lane(lane)
        if shard is self:
            return await super().admit(payload, options, carries_context=carries_context)
        return await shard.admit(payload, options, carries_context=carries_context)

    async def _send(self, batch: Batch) -> list[Verdict]:
        """A planned batch: each shard's items sent to it at once, verdicts in input order."""
        admissions = batch.admissions
        if not admissions:
            return batch.settle([])
        placement = self.placement_map
        parts: dict[int, list[int]] = {}
        for i, item in enumerate(admissions):
            parts.setdefault(placement.shard_of(item.group), []).append(i)
        sent = await asyncio.gather(
            *(
                self.shards[k].engine.enqueue(
                    [admissions[i] for i in positions],
                    placement.fence(admissions[i].group for i in positions),
                )
                for k, positions in parts.items()
            )
        )
        replies: list[Any] = [None] * len(admissions)
        for positions, answers in zip(parts.values(), sent, strict=True):
            for i, answer in zip(positions, answers, strict=True):
                replies[i] = answer
        verdicts = batch.settle(replies)
        if self._listened():
            self._emit(
                {"event": v.kind, "job": v.id}
                for v in verdicts
                if v.kind in ("enqueued", "scheduled")
            )
        return verdicts

    # -- claims --------------------------------------------------------------------------------

    async def claim_some(
        self, n: int, lease: float = DEFAULT_LEASE, *, one_lane: bool = False
    ) -> tuple[list[Job], bool] | Empty | RateLimited:
        """Claim on the shard the stride picks (the one whose lanes are furthest behind their
        weights' share); a shard found empty is marked idle and the next one is tried, so
        ``Empty`` means every shard was (the loads are read again before it is answered, when
        the last read is older than the call). ``more``: some shard still has a serviceable lane."""
        ms(lease, "lease", positive=True, most=MAX_LEASE)
        count(n, "n", maximum=MAX_BATCH)
        if type(one_lane) is not bool:
            raise InvalidArgument("one_lane", one_lane, "must be True or False")
        stride = self._stride
        fresh = asyncio.get_running_loop().time() - self._loads_at >= self.refresh
        if fresh:
            await self.read_loads()
        retry_in: float | None = None
        visited: set[int] = set()
        for _ in range(2 * len(self.shards) + 2):  # a shard twice at most: before, after a read
            k = stride.pick()
            if k is None:
                if not fresh:
                    # Known idle, but the loads are older than this call: "empty" must be true
                    # now (a lane resumed or joined a shard since the last read).
                    await self.read_loads()
                    fresh = True
                    continue
                # Idle by every ring: a lane benched by its rate whose time came rejoins its
                # ring at its shard's next claim (or upkeep), so such a shard is visited once.
                k = next((d for d in self._due_now() if d not in visited), None)
                if k is None:
                    break
            visited.add(k)
            outcome = await Queue.claim_some(self.shards[k], n, lease, one_lane=one_lane)
            if isinstance(outcome, tuple):
                jobs, more = outcome
                stride.charge(k, len(jobs))
                if not more:
                    stride.observe(k, IDLE)
                self._remember(jobs)
                return jobs, more or stride.pick() is not None
            stride.observe(k, IDLE)  # empty, or its own budget spent: visit the others
            wait = outcome.retry_in if isinstance(outcome, Empty) else outcome.wait
            if wait is not None:
                retry_in = wait if retry_in is None else min(retry_in, wait)
        hints = [h for h in (retry_in, *self._due_later(visited)) if h is not None]
        return Empty(min(hints) if hints else None)

    async def read_loads(self) -> list[ShardLoad]:
        """Read every shard's load (its most urgent band with a ringed lane and the weights on
        that band's ring) and when its first benched lane returns, one pipelined read per
        shard, and tell the stride."""
        clock, *replies = await asyncio.gather(
            self.wire.call("TIME"),
            *(
                shard.wire.call_many(
                    [
                        ("HGETALL", shard.keys.ringweight),
                        ("HGET", shard.keys.meta, "dweight"),
                        ("ZRANGE", shard.keys.rdue, 0, 0, "WITHSCORES"),
                    ]
                )
                for shard in self.shards
            ),
        )
        self._loads_at = asyncio.get_running_loop().time()
        self._now_ms = int(clock[0]) * 1000 + int(clock[1]) // 1000
        self._dues = [_first_score(due) for _, _, due in replies]
        loads = [_load(counters, dweight) for counters, dweight, _ in replies]
        for k, load in enumerate(loads):
            self._stride.observe(k, load)
        return loads

    def _due_now(self) -> list[int]:
        """The shards whose first benched lane was due at the last read."""
        return [k for k, due in enumerate(self._dues) if due is not None and due <= self._now_ms]

    def _due_later(self, visited: set[int]) -> list[float]:
        """Seconds until the first benched lane of each shard not visited returns."""
        return [
            (due - self._now_ms) / 1000
            for k, due in enumerate(self._dues)
            if due is not None and due > self._now_ms and k not in visited
        ]

    def _remember(self, jobs: Sequence[Job]) -> None:
        held = self._held
        for job in jobs:
            held[job.id] = job.shard
        if len(held) > HELD_KEPT:
            for old in list(itertools.islice(held, len(held) - HELD_KEPT)):
                del held[old]

    async def _shard_of_id(self, job_id: str) -> Queue:
        """The shard holding job ``job_id``: the one that leased it here, else the one whose
        row exists (one read of every shard), else shard 0 (which answers "no such job")."""
        k = self._held.get(job_id)
        if k is not None:
            return self.shards[k]
        found = await asyncio.gather(
            *(shard.wire.call("EXISTS", shard.keys.job(job_id)) for shard in self.shards)
        )
        return next((s for s, hit in zip(self.shards, found, strict=True) if hit), self)

    async def _shard_of(self, job: Job | str) -> Queue:
        if isinstance(job, Job):
            return self.shards[job.shard]
        return await self._shard_of_id(_ids.validate(job, "JOB", "job id"))

    def _settled(self, job_ids: Iterable[str]) -> None:
        held = self._held
        for job_id in job_ids:
            held.pop(job_id, None)

    # -- settles (the job's shard) -------------------------------------------------------------

    async def complete(
        self, job: Job | str, token: int | None = None, *, result: Any = None
    ) -> bool:
        shard = await self._shard_of(job)
        done = await Queue.complete(shard, job, token, result=result)
        self._settled([job.id if isinstance(job, Job) else job])
        return done

    async def complete_each(self, jobs: Iterable[Job | Completed]) -> list[CompleteOutcome]:
        items = list(jobs)
        return await self._each(
            items,
            lambda item: (item.job if isinstance(item, Completed) else item).shard,
            Queue.complete_each,
        )

    async def complete_encoded(self, successes: list[Success]) -> list[CompleteOutcome]:
        held = self._held
        shard_of = {s.id: held.get(s.id) for s in successes}
        missing = [job_id for job_id, k in shard_of.items() if k is None]
        for job_id in missing:
            shard_of[job_id] = (await self._shard_of_id(job_id)).shard
        return await self._each(successes, lambda s: shard_of[s.id] or 0, Queue.complete_encoded)

    async def retry(
        self,
        job: Job | str,
        token: int | None = None,
        *,
        delay: float = 0.0,
        max_attempts: int = 3,
        error: str = "",
        traceback: str | None = None,
    ) -> Literal["scheduled", "dead", "cancelled", "gone"]:
        shard = await self._shard_of(job)
        outcome = await Queue.retry(
            shard,
            job,
            token,
            delay=delay,
            max_attempts=max_attempts,
            error=error,
            traceback=traceback,
        )
        self._settled([job.id if isinstance(job, Job) else job])
        return outcome

    async def retry_each(self, failures: Iterable[Failed]) -> list[RetryOutcome]:
        return await self._each(list(failures), lambda f: f.job.shard, Queue.retry_each)

    async def delay(self, job: Job | str, token: int | None = None, *, delay: float) -> bool:
        shard = await self._shard_of(job)
        done = await Queue.delay(shard, job, token, delay=delay)
        self._settled([job.id if isinstance(job, Job) else job])
        return done

    async def cool(
        self,
        job: Job | str,
        token: int | None = None,
        *,
        after: float | None = None,
        until: float | None = None,
        lane: str = "_",
    ) -> bool:
        shard = await self._shard_of(job)
        done = await Queue.cool(shard, job, token, after=after, until=until, lane=lane)
        self._settled([job.id if isinstance(job, Job) else job])
        return done

    async def extend(self, job: Job | str, token: int | None = None, *, lease: float) -> bool:
        shard = await self._shard_of(job)
        return await Queue.extend(shard, job, token, lease=lease)

    async def extend_many(
        self, jobs: Iterable[Job | tuple[str, int]], *, lease: float
    ) -> list[str]:
        items = list(jobs)
        shards = [
            item.shard if isinstance(item, Job) else (await self._shard_of(item[0])).shard
            for item in items
        ]
        by_shard: dict[int, list[Job | tuple[str, int]]] = {}
        for item, k in zip(items, shards, strict=True):
            by_shard.setdefault(k, []).append(item)
        lost = await asyncio.gather(
            *(Queue.extend_many(self.shards[k], part, lease=lease) for k, part in by_shard.items())
        )
        return [job_id for part in lost for job_id in part]

    async def _end_cancelled(self, job: Job) -> Any:
        self._settled([job.id])
        return await Queue._end_cancelled(self.shards[job.shard], job)

    async def _each(
        self,
        items: list[_T],
        shard_of: Callable[[_T], int],
        settle: Callable[[Queue, list[_T]], Awaitable[list[Any]]],
    ) -> list[Any]:
        """``settle`` each shard's part of ``items`` on it, at once; outcomes in input order."""
        parts: dict[int, list[int]] = {}
        for i, item in enumerate(items):
            parts.setdefault(shard_of(item), []).append(i)
        answers = await asyncio.gather(
            *(
                settle(self.shards[k], [items[i] for i in positions])
                if k
                else settle(self, [items[i] for i in positions])
                for k, positions in parts.items()
            )
        )
        outcomes: list[Any] = [None] * len(items)
        for positions, part in zip(parts.values(), answers, strict=True):
            for i, outcome in zip(positions, part, strict=True):
                outcomes[i] = outcome
        self._settled(_job_id(item) for item in items)
        return outcomes

    # -- by id (the shard that holds the job) --------------------------------------------------

    async def wait(self, id: str, timeout: float | None = None) -> JobInfo | None:
        return await Queue.wait(await self._shard_of(id), id, timeout)

    async def job(self, id: str) -> JobInfo | None:
        return await Queue.job(await self._shard_of(id), id)

    async def state(self, id: str) -> JobState:
        return await Queue.state(await self._shard_of(id), id)

    async def cancel(self, id: str, reason: str = "") -> Any:
        return await Queue.cancel(await self._shard_of(id), id, reason)

    async def remove(self, id: str) -> bool:
        return await Queue.remove(await self._shard_of(id), id)

    async def reprocess(self, id: str) -> bool:
        return await Queue.reprocess(await self._shard_of(id), id)

    async def position(self, id: str) -> Any:
        return await Queue.position(await self._shard_of(id), id)

    async def logs(self, id: str, limit: int = 100) -> list[str]:
        return await Queue.logs(await self._shard_of(id), id, limit)

    async def progress(self, job: Job | str, *args: Any, **kwargs: Any) -> Any:
        return await Queue.progress(await self._shard_of(job), job, *args, **kwargs)

    async def reassign(self, id: str, lane: str | None = None, *, group: str | None = None) -> bool:
        """Move a pending job to another lane of the same shard; a lane on another shard is
        refused (:class:`LaneMoved`, from the shard's fence): moving jobs between shards is
        a lane move's work."""
        shard = await self._shard_of(id)
        return await Queue.reassign(shard, id, lane, group=group)

    # -- lanes, time and reads (every shard) ---------------------------------------------------

    def lane(self, name: str) -> Lane:
        """The control handle of lane ``name``, on its shard."""
        shard = self._shard_of_lane(validate_group(name))
        return Queue.lane(shard, name)

    async def upkeep(self, limit: int = 1000, max_stalled: int = 3) -> Upkeep:
        """Every shard's upkeep at once, summed; ``next_due`` the soonest."""
        done = await asyncio.gather(
            *(Queue.upkeep(shard, limit, max_stalled) for shard in self.shards)
        )
        dues = [u.next_due for u in done if u.next_due is not None]
        return Upkeep(
            sum(u.moved for u in done),
            sum(u.lanes for u in done),
            Reaped(
                [i for u in done for i in u.reaped.recovered],
                [i for u in done for i in u.reaped.dead],
            ),
            min(dues) if dues else None,
        )

    async def promote(self, limit: int = 1000) -> int:
        return sum(await self._every(Queue.promote, limit))

    async def reap(self, limit: int = 100, max_stalled: int = 3) -> Reaped:
        done = await self._every(Queue.reap, limit, max_stalled)
        return Reaped([i for r in done for i in r.recovered], [i for r in done for i in r.dead])

    async def counts(self) -> Counts:
        """Every shard's counts, summed."""
        each = await self._every(Queue.counts)
        return Counts(*(sum(getattr(c, f.name) for c in each) for f in fields(Counts)))

    async def lanes(self, names: Sequence[str] = ()) -> list[LaneInfo]:
        if names:
            placement = self.placement_map
            wanted: dict[int, list[str]] = {}
            for name in names:
                wanted.setdefault(placement.shard_of(validate_group(name)), []).append(name)
            parts = await asyncio.gather(
                *(Queue.lanes(self.shards[k], part) for k, part in wanted.items())
            )
            found = {info.lane: info for part in parts for info in part}
            return [found[name] for name in names if name in found]
        return [info for part in await self._every(Queue.lanes) for info in part]

    async def ring(self) -> list[str]:
        """The serviceable lanes, the most urgent band first; within a band each shard's rota
        in turn, shard by shard (the claims interleave them by weight)."""
        bands = await asyncio.gather(
            *(shard.wire.call("HGET", shard.keys.meta, "bands") for shard in self.shards)
        )
        used = [{int(p) for p in (b or b"").decode()} | {PRIORITY_DEFAULT} for b in bands]
        rings = await asyncio.gather(
            *(
                shard.wire.call_many(
                    [("LRANGE", shard.keys.band_ring(band), 0, -1) for band in sorted(mine)]
                )
                for shard, mine in zip(self.shards, used, strict=True)
            )
        )
        by_band: dict[int, list[str]] = {}
        for mine, lists in zip(used, rings, strict=True):
            for band, members in zip(sorted(mine), lists, strict=True):
                by_band.setdefault(band, []).extend(m.decode() for m in members)
        return [lane for band in sorted(by_band, reverse=True) for lane in by_band[band]]

    async def is_paused(self) -> bool:
        return all(await self._every(Queue.is_paused))

    async def has_work(self, scheduled_within: float = 0.0) -> bool:
        return any(await self._every(Queue.has_work, scheduled_within))

    async def rate_limit_ttl(self) -> float:
        return max(await self._every(Queue.rate_limit_ttl))

    async def etas(self) -> dict[str, Any]:
        return {lane: eta for part in await self._every(Queue.etas) for lane, eta in part.items()}

    async def dead(self, limit: int = 100) -> list[JobInfo]:
        """The dead jobs of every shard, at most ``limit`` of each, merged by id (mint order)."""
        return sorted(
            (info for part in await self._every(Queue.dead, limit) for info in part),
            key=lambda info: info.id,
        )[:limit]

    # -- admin (every shard) -------------------------------------------------------------------

    async def pause(self) -> None:
        await self._every(Queue.pause)

    async def resume(self) -> None:
        await self._every(Queue.resume)

    async def fairness(self, by: FairBy = "count", *, quantum: float | None = None) -> bool:
        return any(await self._every(Queue.fairness, by, quantum=quantum))

    async def apply_policies(
        self,
        policies: Mapping[str, Policy] | None = None,
        /,
        *,
        default: Policy | None = None,
        **lanes: Policy,
    ) -> int:
        """Every shard holds the default; each named lane's own policy goes to its shard (and
        a lane named before and not now is cleared there, as on one queue)."""
        named = {**(policies or {}), **lanes}
        placement = self.placement_map
        per_shard: list[dict[str, Policy]] = [{} for _ in self.shards]
        for lane, policy in named.items():
            per_shard[placement.shard_of(validate_group(lane))][lane] = policy
        before = await Queue.policies(self)
        changed = await asyncio.gather(
            *(
                Queue.apply_policies(shard, per_shard[k], default=default)
                for k, shard in enumerate(self.shards)
            )
        )
        # Every shard holds the same default, so each of its settings that changed was counted
        # once per shard: the queue's answer counts it once, as one queue's does.
        after = (await Queue.policies(self)).default
        fields_changed: int = sum(
            bool(getattr(after, f.name) != getattr(before.default, f.name)) for f in fields(Policy)
        )
        return sum(changed) - (len(self.shards) - 1) * fields_changed

    async def policies(self) -> Policies:
        """The default (every shard holds it) and every shard's named lanes."""
        each = await self._every(Queue.policies)
        lanes = {lane: policy for part in each for lane, policy in part.lanes.items()}
        return Policies(each[0].default, dict(sorted(lanes.items())))

    async def ordered(self, on: bool) -> None:
        await self._every(Queue.ordered, on)

    async def drain(self, *, schedule: bool = False, results: bool = False) -> int:
        return sum(await self._every(Queue.drain, schedule=schedule, results=results))

    async def obliterate(self, *, force: bool = False) -> None:
        """Delete every key of every shard, then the directory (every shard paused first)."""
        await self._every(Queue.obliterate, force=force)
        for shard in self.shards:
            await shard.wire.call("DEL", shard.keys.owns, shard.keys.moved, shard.keys.adopted)
        await self.wire.call("DEL", self.keys.directory, self.keys.placed)

    async def concurrency(self, ceiling: int | None) -> bool:
        raise Unsupported(
            "a queue-wide concurrency ceiling on a sharded queue is split into per-shard quotas, "
            "not built yet (docs/concepts/shards.md, 'Queue-wide gates'); lane ceilings work"
        )

    async def rate_limit(
        self, max: int | None, window: float | None = None, *, mode: RateMode = DEFAULT_MODE
    ) -> bool:
        raise Unsupported(
            "a queue-wide rate on a sharded queue is split into per-shard quotas, not built yet "
            "(docs/concepts/shards.md, 'Queue-wide gates'); lane rates work"
        )

    async def add_flow(self, flow: Flow, *, carries_context: bool = False) -> FlowIds:
        raise Unsupported("flows on a sharded queue are not built yet (docs/concepts/shards.md)")

    def subscribe(self) -> Subscription:
        raise Unsupported(
            "lifecycle events of a sharded queue are not built yet (each shard publishes on its "
            "own channel)"
        )

    async def _every(self, verb: Callable[..., Awaitable[_T]], *args: Any, **kw: Any) -> list[_T]:
        """``verb`` (a :class:`Queue` method) on every shard at once, answers in shard order."""
        return list(await asyncio.gather(*(verb(shard, *args, **kw) for shard in self.shards)))


class ShardedCancelHub(CancelHub):
    """The cancel hubs of every shard as one: a consumer holding a job is told of its cancel
    on whichever shard's channel it comes (each shard announces its own jobs)."""

    def __init__(self, shards: Sequence[Queue]) -> None:
        first = shards[0]
        super().__init__(first.wire, first.keys)
        self._hubs = [self] + [shard.cancel_hub for shard in shards[1:]]

    def hold(self, job_id: str, abort: Callable[[], None]) -> None:
        for hub in self._hubs:
            CancelHub.hold(hub, job_id, abort)

    def drop(self, job_id: str) -> None:
        for hub in self._hubs:
            CancelHub.drop(hub, job_id)

    async def open(self) -> None:
        await asyncio.gather(*(CancelHub.open(hub) for hub in self._hubs))

    async def release(self) -> None:
        await asyncio.gather(*(CancelHub.release(hub) for hub in self._hubs))

    async def close(self) -> None:
        await asyncio.gather(*(CancelHub.close(hub) for hub in self._hubs))


def _job_id(item: object) -> str:
    if isinstance(item, Job):
        return item.id
    if isinstance(item, Completed | Failed):
        return item.job.id
    assert isinstance(item, Success)
    return item.id


def _first_score(reply: Any) -> int | None:
    """The score of a ``ZRANGE … 0 0 WITHSCORES`` reply (RESP3: ``[[member, score]]``)."""
    if not reply:
        return None
    first = reply[0]
    return int(float(first[1] if isinstance(first, list) else reply[1]))


def _check_shards(shards: object) -> int:
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgument("shards", shards, f"must be an int from 1 to {MAX_SHARDS}")
    return shards


def _load(counters: Any, dweight: Any) -> ShardLoad:
    """A shard's load from its ``ringweight`` counters (``own:<band>``, ``count:<band>``) and
    its default lane weight."""
    default = int(dweight) if dweight is not None else 1
    weights: dict[int, int] = {}
    pairs = (
        counters.items()
        if isinstance(counters, dict)
        else zip(counters[::2], counters[1::2], strict=True)
    )
    for name, value in pairs:
        kind, _, band = (name.decode() if isinstance(name, bytes) else str(name)).partition(":")
        weight = int(value) * (default if kind == "count" else 1)
        weights[int(band)] = weights.get(int(band), 0) + weight
    active = {band: weight for band, weight in weights.items() if weight > 0}
    if not active:
        return IDLE
    top = max(active)
    return ShardLoad(top, active[top])


async def _read_map(wire: Wire, keys: Keyspace) -> ShardMap | None:
    directory, placed = await wire.call_many(
        [("HGETALL", keys.directory), ("HGETALL", keys.placed)]
    )
    if not directory:
        return None
    return ShardMap.from_stored(_pairs(directory), _pairs(placed))


def _pairs(reply: Any) -> dict[bytes, bytes]:
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


def _slot_owners(wire: Wire) -> list[str] | None:
    """The cluster's slot map (each slot's primary address) when ``wire`` is a cluster
    router; None on one server."""
    owner = getattr(wire, "owner", None)
    if owner is None:
        return None
    return [owner(s).address for s in range(16384)]


async def _refuse_a_queue_with_work(wire: Wire, keys: Keyspace) -> None:
    """A queue of one slot that holds jobs cannot become shard 0 by a first open: its lanes
    would be split from their new shards (growing a queue is the move procedure's work)."""
    probe = Queue(keys.queue, wire, minter=_ids.Minter(0))
    counts = await probe.counts()
    if counts.pending or counts.active or counts.scheduled or counts.waiting:
        raise InvalidArgument(
            "shards",
            "",
            f"queue {keys.queue!r} holds jobs as a queue of one slot; making it sharded moves "
            "its lanes, not built yet (docs/concepts/shards.md, 'Changing S')",
        )

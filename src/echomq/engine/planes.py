"""The admin and read verbs of a :class:`echomq.Queue`: lanes, settings and cleanup written
through the queue's admin plane (admin.py), and its reads through its read plane (reads.py), both
on the queue's typed engine. Mixed into ``Queue``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from echomq.engine import ids as _ids
from echomq.engine.admin import Admin
from echomq.engine.eta import Eta
from echomq.engine.lanes import Lane
from echomq.engine.names import validate_group
from echomq.engine.options import lane_alias
from echomq.engine.policies import DEFAULT_MODE, FairBy, Fairness, Policies, Policy, RateMode
from echomq.engine.reads import Reads
from echomq.engine.results import Counts, JobInfo, JobState, LaneInfo
from echomq.errors import InvalidArgument


class Planes:
    """The verbs of the queue's admin and read planes (mixed into :class:`Queue`)."""

    _admin: Admin
    _reads: Reads

    if TYPE_CHECKING:  # the Queue's (declared only: a definition here would hide it)

        async def _refuse_sharded_name(self) -> None:
            """Refuse a plain queue on a sharded queue's name (once per queue)."""

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
        _ids.validate(id, "JOB", "job id")  # the arguments before the read below
        validate_group(lane)
        await self._refuse_sharded_name()  # to a lane of another shard, unfenced, otherwise
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

    async def dedup_job(self, key: str) -> str | None:
        """The id of the job dedup key ``key`` maps to now (an ``enqueue(..., dedup_key=)``
        while it lasts answers that job as a duplicate), or None when it maps to none."""
        return await self._reads.dedup_job(key)

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

"""The batch consumer: serves a queue whose jobs run in batches. It gathers a batch (claims up
to ``max_size`` jobs; below the shape's ``least`` it parks on the wake list for more, up to
``max_wait``), hands it to the :data:`RunBatch` plugged in (the task layer's batch tasks are
one), and keeps the leases of every batch in hand, gathering or running, in one call.

Parking, lease keeping, settling and the stop are :class:`Consumer`'s own parts
(:class:`~echomq.consumers.shift.Shift`); what is this loop's own is the gathering."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from echomq.consumers.cadence import Cadence, upkeep_if_due
from echomq.consumers.ledger import Ledger, Observer, Tally, describe
from echomq.consumers.options import ConsumerOptions
from echomq.consumers.shift import Shift
from echomq.consumers.spans import run_batch
from echomq.engine.checks import MAX_BATCH
from echomq.engine.results import Empty, Job
from echomq.errors import EchoMQError

if TYPE_CHECKING:
    from echomq.engine.queue import Queue

log = logging.getLogger("echomq.consumer")

#: ``run(jobs, ledger)``: run one batch and settle each of its jobs once through ``ledger``
#: (:meth:`Ledger.complete` or :meth:`Ledger.fail`). A job it leaves unsettled (it raised) is
#: reaped once its lease expires; a cancel at the stop's deadline leaves every job so.
RunBatch = Callable[[list[Job], Ledger], Awaitable[None]]


class BatchShape(Protocol):
    """How batches form (``echomq.Batching`` is one): at most ``max_size`` jobs; below
    ``least`` a batch waits up to ``max_wait`` seconds for more; ``concurrency`` batches run
    at once (the next one gathers meanwhile)."""

    @property
    def max_size(self) -> int: ...

    @property
    def max_wait(self) -> float: ...

    @property
    def least(self) -> int: ...

    @property
    def concurrency(self) -> int: ...

    @property
    def by_lane(self) -> bool: ...


@dataclass(slots=True, eq=False)
class _Batch:
    """One batch in hand (its identity is its key in the leases while it gathers)."""

    jobs: list[Job] = field(default_factory=list)


class BatchConsumer:
    """Runs ``run`` on batches of ``queue``'s jobs shaped by ``shape``, up to
    ``shape.concurrency`` batches at once."""

    def __init__(
        self,
        queue: Queue,
        run: RunBatch,
        shape: BatchShape,
        options: ConsumerOptions,
        *,
        name: str | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.queue = queue
        self.run_batch = run
        self.batching = shape
        self.options = options
        self.name = queue.name if name is None else name
        self.observer = observer
        self.cadence = Cadence(options.beat, options.idle_upkeep)
        shift = Shift(queue, options, self.name, self.cadence, observer)
        self._shift = shift
        self._parking, self._leases, self._ledger = shift.parking, shift.leases, shift.ledger
        self._stopping = shift.stopping
        self.tally: Tally = self._ledger.tally

    def stop(self) -> None:
        """Claim nothing more; batches in hand finish (up to ``stop_timeout``)."""
        self._shift.stop()

    @property
    def in_flight(self) -> int:
        """Jobs in hand, gathering or running."""
        return self._leases.jobs

    async def run(self) -> Tally:
        """Gather and run batches until :meth:`stop`; returns the tally (counted per job)."""
        # Stopped before it began (or while its wake connection was made): nothing to claim.
        if not await self._shift.begin():
            return self.tally
        try:
            while not self._stopping.is_set():
                await self._beat_if_due()
                if len(self._shift.running) >= self.batching.concurrency:
                    await self._shift.wait_for_slot()
                    continue
                batch = await self._gather()
                if batch is not None:
                    holding = self._leases.release(batch)  # the task holds the batch from now
                    assert holding is not None
                    self._shift.running[asyncio.ensure_future(self._run(batch))] = holding
        finally:
            await self._shift.end()
        return self.tally

    # -- gathering -----------------------------------------------------------------------------

    async def _gather(self) -> _Batch | None:
        """One batch: what one claim brings, and while below the least size, what the wake
        list announces within ``max_wait``. None when nothing was claimable."""
        shape, options = self.batching, self.options
        batch = _Batch()
        self._leases.hold(batch, batch.jobs)  # held from before its first claim
        more = await self._claim(batch)
        if not batch.jobs:
            self._leases.release(batch)
            if more is None:  # empty: park until a wake token, at most a beat
                now = time.monotonic()
                await self._parking.wait(
                    self.cadence.park_for(now) if options.upkeep else options.beat
                )
            return None
        deadline = time.monotonic() + shape.max_wait
        while len(batch.jobs) < shape.least and not shape.by_lane and not self._stopping.is_set():
            now = time.monotonic()
            if now >= deadline:
                break
            if not more:
                # A lane emptied by our claim rejoins the ring, and pushes a wake token, when
                # a job is enqueued on it: parked, not polling.
                beat = self.cadence.park_for(now) if options.upkeep else options.beat
                await self._parking.wait(min(deadline - now, beat))
                if self._stopping.is_set():
                    break  # stopping: run what is in hand, claim nothing more
                await self._beat_if_due()
            more = bool(await self._claim(batch))
        return batch

    async def _claim(self, batch: _Batch) -> bool | None:
        """Claim up to the batch's room into ``batch``: whether lanes remain serviceable; None
        when the answer was empty or rate-limited (or the claim failed)."""
        room = min(self.batching.max_size - len(batch.jobs), MAX_BATCH)
        self.tally.claims += 1
        try:
            outcome = await self.queue.claim_some(
                room, self.options.lease, one_lane=self.batching.by_lane
            )
        except EchoMQError as exc:
            log.warning("%s: claim on %s failed: %s", self.name, self.queue.name, exc)
            await self._shift.sleep(min(self.options.beat, 1.0))
            return None
        if not isinstance(outcome, tuple):
            if isinstance(outcome, Empty):
                if outcome.retry_in is not None:  # a benched lane rejoins by an upkeep
                    self.cadence.soon(time.monotonic(), outcome.retry_in)
            elif not batch.jobs:
                await self._shift.sleep(outcome.wait)  # rate-limited, nothing in hand: wait
            return None
        jobs, more = outcome
        batch.jobs.extend(jobs)
        self._ledger.claimed(jobs)
        return more

    async def _beat_if_due(self) -> None:
        if self.options.upkeep:
            await upkeep_if_due(self.queue, self.cadence, self.options, self.name)

    # -- running -------------------------------------------------------------------------------

    async def _run(self, batch: _Batch) -> None:
        try:
            await run_batch(self.queue, batch.jobs, self.run_batch(batch.jobs, self._ledger))
        except Exception as exc:
            # A bug in running or settling: the leases of the jobs left unsettled expire and
            # they are reaped (as after a stop whose deadline passed: that CancelledError
            # goes through).
            log.error("%s: settling a batch failed: %s", self.name, describe(exc))
        finally:
            self._shift.free(asyncio.current_task())

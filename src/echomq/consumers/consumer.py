"""The consumer: claims, runs an async handler, settles, and parks when there is nothing to do.

Parking is a ``BLPOP`` on the queue's wake list with the beat as its timeout, on a connection
of the consumer's own (never the pool's); a ``rate_limited`` answer parks it for exactly the
wait. Each beat runs the queue's upkeep (promote + reap) unless a metronome does it for a pool.
The parts it shares with the batch consumer (parking, lease keeping, settling, the stop) are
composed in its :class:`~echomq.consumers.shift.Shift`; what is its own is the claim window,
one job's run and the handler's signals (:class:`Retry`, :class:`Defer`, :class:`Drop`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from echomq.consumers import abort as _abort
from echomq.consumers.cadence import Cadence, upkeep_if_due
from echomq.consumers.ledger import Observer, Outcome, Tally, describe
from echomq.consumers.log_fields import job_fields
from echomq.consumers.options import ConsumerOptions, Policy, RetryPlan
from echomq.consumers.shift import Shift
from echomq.consumers.signals import Cool, Defer, Drop, Retry
from echomq.consumers.spans import instrument
from echomq.engine.checks import MAX_BATCH
from echomq.engine.results import Empty, Job, RateLimited
from echomq.errors import (
    EchoMQError,
    InvalidArgument,
    Refusal,
    ServerError,
    StaleTokenError,
    WireError,
)

if TYPE_CHECKING:
    from echomq.consumers.metronome import Metronome
    from echomq.engine.queue import Queue

__all__ = [
    "Consumer",
    "ConsumerOptions",
    "Defer",
    "Drop",
    "Handler",
    "Observer",
    "Outcome",
    "Policy",
    "Retry",
    "RetryPlan",
    "Tally",
    "describe",
]

log = logging.getLogger("echomq.consumer")

Handler = Callable[[Job], Awaitable[Any]]


class Consumer:
    """Runs ``handler`` on the jobs of ``queue``, up to ``concurrency`` at once."""

    def __init__(
        self,
        queue: Queue,
        handler: Handler,
        options: ConsumerOptions | None = None,
        *,
        metronome: Metronome | None = None,
        name: str = "consumer",
        observer: Observer | None = None,
        policy: Policy | None = None,
    ) -> None:
        if not asyncio.iscoroutinefunction(handler) and not asyncio.iscoroutinefunction(
            getattr(handler, "__call__", None)  # noqa: B004
        ):
            raise InvalidArgument("handler", handler, "must be an async function (async def)")
        self.queue = queue
        self.options = options or ConsumerOptions()
        self.metronome = metronome
        self.name = name
        # A span per attempt once the app set an OpenTelemetry tracer provider; else as given.
        self.handler, self.observer = instrument(queue, handler, observer)
        #: How an unexpected failure goes on; None: the options' backoff and max_attempts.
        self.policy = policy
        self._loop: asyncio.AbstractEventLoop  # set by run
        # Under a metronome, the metronome runs the upkeep: share its cadence.
        self.cadence = (
            metronome.cadence
            if metronome is not None
            else Cadence(self.options.beat, self.options.idle_upkeep)
        )
        shift = Shift(queue, self.options, name, self.cadence, self.observer, metronome)
        self._shift = shift
        self._parking, self._leases, self._ledger = shift.parking, shift.leases, shift.ledger
        self._stopping = shift.stopping
        # Each job in hand, and when its lease is next due for extension. A finished handler
        # hands its settle to the ledger and frees its slot; the settles of one tick go out
        # together, pipelined with the claim that fills the freed slots.
        self._running = shift.running
        self.tally = self._ledger.tally

    # -- control -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Claim nothing more; jobs in hand finish (up to ``stop_timeout``); ``run`` returns."""
        self._shift.stop()  # a parked BLPOP (or a wait for a slot) ends now

    @property
    def in_flight(self) -> int:
        return len(self._running)

    def poke(self) -> None:
        """The metronome's go-ahead: claim once."""
        self._parking.poke()

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> Tally:
        """Work until :meth:`stop`; returns the tally."""
        options = self.options
        # Stopped before it began (or while its wake connection was made): nothing to claim.
        if not await self._shift.begin():
            return self.tally
        # Subscribed before the first claim: a cancel of a job this consumer holds is heard.
        try:
            await self.queue.cancel_hub.open()
        except BaseException:
            await self._shift.end()
            raise
        self._loop = asyncio.get_running_loop()
        # Whether a claim may find work. After an empty claim only a wake token, the beat's
        # upkeep finding work, or a freed slot makes claiming worth a round trip: no polling.
        hint = True
        empty = Empty()
        # Claims in flight per round: doubles while every claim brings work and lanes remain,
        # back to one at the first empty answer (so a drained queue costs one wasted claim).
        window = 1
        try:
            while not self._stopping.is_set():
                if options.upkeep and self.metronome is None and await self._beat_if_due():
                    hint = True
                free = options.concurrency - len(self._running)
                if free <= 0:
                    await self._shift.wait_for_slot()
                    hint = True
                    continue
                if not hint:
                    hint = await self._park(empty)
                    continue
                size = min(options.batch or free, free, MAX_BATCH)
                rounds = min(window, free // size, options.claims_in_flight)
                # The settles the freed slots left (their flush is a task started this turn) and
                # these claims go out in one write: corked until the tasks' first steps ran.
                cork = getattr(self.queue.wire, "cork", None)
                uncork = cork() if cork is not None else None
                claims = asyncio.gather(
                    *(self._claim(size) for _ in range(max(1, rounds))), return_exceptions=True
                )
                if uncork is not None:
                    self._loop.call_soon(uncork)
                outcomes = await claims
                limited: RateLimited | None = None
                full = True  # every claim of the round brought work and lanes remain
                failed: BaseException | None = None
                due = self._leases.due(time.monotonic())  # the claims' jobs start now
                for outcome in outcomes:
                    if isinstance(outcome, BaseException):
                        failed, full = outcome, False
                    elif isinstance(outcome, tuple):
                        jobs, more = outcome
                        for job in jobs:
                            self._start(job, due)
                        if self.observer is not None:
                            self._ledger.claimed(jobs)
                        full = full and more
                    elif isinstance(outcome, RateLimited):
                        limited, full = outcome, False
                    else:
                        empty, full = outcome, False
                if full:
                    window *= 2
                    continue
                window = 1
                if failed is not None:
                    # A lost connection or a failover: the jobs other claims brought are in
                    # hand; try again after a pause (a claim that ran unseen is reaped later).
                    if not isinstance(failed, WireError | ServerError) or isinstance(
                        failed, Refusal
                    ):
                        raise failed
                    log.warning("%s: claim on %s failed: %s", self.name, self.queue.name, failed)
                    await self._shift.sleep(min(options.beat, 1.0))
                elif limited is not None:
                    await self._shift.sleep(limited.wait)
                else:
                    hint = False
        finally:
            try:
                await self._shift.end()
            finally:
                await self.queue.cancel_hub.release()
        return self.tally

    async def _claim(self, size: int) -> tuple[list[Job], bool] | Empty | RateLimited:
        self.tally.claims += 1
        if self.metronome is not None:
            self._parking.claiming()
        return await self.queue.claim_some(size, self.options.lease)

    async def _beat_if_due(self) -> bool:
        """Run the upkeep when something may be due; True when it made something claimable."""
        done = await upkeep_if_due(self.queue, self.cadence, self.options, self.name)
        return done is not None and done.found_work

    async def _park(self, empty: Empty) -> bool:
        """Nothing claimable: wait for a wake token (or the metronome's poke), at most a beat.

        True when woken (worth a claim), False when the wait ran out.
        """
        if self.metronome is not None:
            await self._parking.poked()
            return True
        now = time.monotonic()
        timeout = self.cadence.park_for(now) if self.options.upkeep else self.options.beat
        if empty.retry_in is not None:
            # A benched lane rejoins the ring by an upkeep (promote): run one as its window
            # ends, or claims find the ring empty until the next idle upkeep.
            self.cadence.soon(now, empty.retry_in)
            timeout = min(timeout, empty.retry_in)
        woken = await self._parking.wait(timeout)
        # A benched lane's window ending (retry_in) is worth a claim even without a token.
        return woken or empty.retry_in is not None

    # -- one job -------------------------------------------------------------------------------

    def _start(self, job: Job, due: float) -> None:
        # No done callback: the task frees its slot as it ends (_execute), a loop turn sooner
        # and one scheduled callback fewer per job.
        task = self._loop.create_task(self._execute(job))
        self._running[task] = (due, (job,))

    async def _execute(self, job: Job) -> None:
        abort = _abort.begin()  # its task is this one: freed by it below, no second look-up
        try:
            cancels = self.queue.cancel_hub
            try:
                cancels.hold(job.id, abort.request)
                started = time.monotonic()
                try:
                    value = await self.handler(job)
                finally:
                    cancels.drop(job.id)  # from here on, a late cancel is the engine's to settle
            except Retry as signal:
                # The policy's attempts (a task's own), counted by the engine in failures: a
                # deferral before this retry is no failure and brings the burial no closer.
                self._fail(job, signal.after, self._attempts_for(job, signal), describe(signal))
            except Drop as signal:
                self._fail(job, 0.0, 1, f"dropped: {signal.reason}")
            except Defer as signal:
                # Queue.delay: rescheduled in one atomic step that adds grace, not a failure.
                after = max(signal.after, 0.001)
                moved = await self._settle(self.queue.delay(job, delay=after), "deferred")
                # Asked only once the job is on the schedule: an upkeep that began before the
                # write would answer without it and the request would be lost.
                self.cadence.soon(time.monotonic(), after)  # promote it when it falls due
                if self.observer is not None:
                    self.observer.settled(
                        self.queue.name, job, "lost" if moved is None else "deferred"
                    )
            except Cool as signal:
                # Queue.cool: back in its lane, no attempt counted, the lane cooled: one step.
                cooled = self.queue.cool(job, after=signal.after, until=signal.until)
                moved = await self._settle(cooled, "cooled")
                # The lane rejoins the ring when an upkeep runs at its cool end: ask for one.
                self.cadence.soon(time.monotonic(), signal.seconds())
                if self.observer is not None:
                    self.observer.settled(
                        self.queue.name, job, "lost" if moved is None else "deferred"
                    )
            except asyncio.CancelledError:
                if not abort.is_heard:
                    raise  # stop's deadline passed: the lease is left to expire and be reaped
                abort.settle()
                await self._end_cancelled(job)
            except Exception as exc:
                self._crashed(job, exc)
            else:
                # The return value is the job's result (kept while the queue's result_ttl lasts);
                # encoded here, so a result the codec refuses fails this attempt alone.
                try:
                    self._ledger.complete(job, value, time.monotonic() - started)
                except InvalidArgument as exc:
                    self._crashed(job, exc)
        except Exception as exc:
            # A bug in settling itself: the job's lease will expire and it will be reaped (as
            # after a stop whose deadline passed: that CancelledError goes through).
            log.error(
                "%s: settling job %s failed: %s", self.name, job.id, describe(exc),
                extra=job_fields(job),
            )  # fmt: skip
        finally:
            # The slot frees as the task ends: no done callback to schedule per job.
            self._shift.free(abort.end())

    async def _end_cancelled(self, job: Job) -> None:
        """The job was cancelled and its handler stopped: end it as cancelled, fenced by the
        token. Refused (the lease moved on, or it ended already) it is left to the engine: a
        cancelled job is never retried."""
        try:
            outcome: str = await self.queue._end_cancelled(job)
        except EchoMQError as exc:
            outcome = describe(exc)  # the reaper ends a marked job once its lease expires
        if outcome == "cancelled":
            self.tally.cancelled += 1
            log.info(
                "%s: job %s cancelled at attempt %d",
                self.name, job.id, job.attempts, extra=job_fields(job),
            )  # fmt: skip
        else:
            self._ledger.lost(job, "cancel", outcome)
        self._ledger.observe(job, "cancelled" if outcome == "cancelled" else "lost")

    def _plan(self, job: Job, exc: Exception) -> RetryPlan | None:
        """The failure policy's plan for ``job``, or None: no policy, or one that raised."""
        if self.policy is None:
            return None
        try:
            return self.policy(job, exc)
        except Exception:  # a broken policy must not lose the job: the defaults apply
            log.exception(
                "%s: the failure policy raised for job %s",
                self.name, job.id, extra=job_fields(job),
            )  # fmt: skip
            return None

    def _attempts_for(self, job: Job, signal: Retry) -> int:
        """The attempts allowed ``job`` in all when its handler asked for a retry: the
        policy's (a task's own), else the options'."""
        plan = self._plan(job, signal)
        return self.options.max_attempts if plan is None else plan.max_attempts

    def _crashed(self, job: Job, exc: Exception) -> None:
        """An unexpected exception: retried after the backoff, dead at the last attempt (or as
        the policy says), with one ERROR record and its traceback, which the row keeps too."""
        plan = self._plan(job, exc)
        if plan is None:
            plan = RetryPlan(
                describe(exc), self.options.backoff.delay(job.attempts), self.options.max_attempts
            )
        formatted = None
        if plan.traceback:
            log.error(
                "%s: job %s attempt %d failed: %s",
                self.name,
                job.id,
                job.attempts,
                plan.error,
                exc_info=exc,
                extra=job_fields(job),
            )
            formatted = "".join(traceback.format_exception(exc))
        else:
            log.warning(
                "%s: job %s attempt %d: %s",
                self.name, job.id, job.attempts, plan.error, extra=job_fields(job),
            )  # fmt: skip
        self._fail(job, plan.delay, plan.max_attempts, plan.error, formatted)

    def _fail(
        self, job: Job, delay: float, max_attempts: int, error: str, formatted: str | None = None
    ) -> None:
        self._ledger.fail(job, error, delay, max_attempts, formatted)

    async def _settle(self, call: Awaitable[Any], counter: str) -> Any:
        try:
            outcome = await call
        except StaleTokenError as exc:
            self.tally.lost += 1
            log.warning("%s: lease lost before settling: %s", self.name, exc)
            return None
        except EchoMQError as exc:
            # The lease will expire and the job will be reaped and run again: nothing is lost.
            self.tally.lost += 1
            log.warning("%s: could not settle: %s", self.name, exc)
            return None
        setattr(self.tally, counter, getattr(self.tally, counter) + 1)
        return outcome

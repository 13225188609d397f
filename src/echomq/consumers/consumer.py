"""The consumer: claims, runs an async handler, settles, and parks when there is nothing to do.

Parking is a ``BLPOP`` on the queue's wake list with the beat as its timeout, on a connection
of the consumer's own (never the pool's); a ``rate_limited`` answer parks it for exactly the
wait. Each beat runs the queue's upkeep (promote + reap) unless a metronome does it for a pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from echomq.consumers import abort as _abort
from echomq.consumers.cadence import SCHEDULED_TOKEN, Cadence
from echomq.consumers.log_fields import job_fields
from echomq.consumers.spans import instrument
from echomq.engine.backoff import Backoff, Exponential, Jitter
from echomq.engine.checks import MAX_ATTEMPTS, MAX_BATCH, MAX_LEASE, count, ms, traceback_text
from echomq.engine.lanes import cool_end
from echomq.engine.results import (
    CompleteOutcome,
    Empty,
    Failed,
    Job,
    RateLimited,
    RetryOutcome,
    Upkeep,
)
from echomq.engine.settler import Settler
from echomq.errors import (
    EchoMQError,
    InvalidArgument,
    Refusal,
    ServerError,
    StaleTokenError,
    WireError,
)
from echomq.wire.connector import Connector
from echomq.wire.pool import dedicated

if TYPE_CHECKING:
    from echomq.consumers.metronome import Metronome
    from echomq.engine.queue import Queue

log = logging.getLogger("echomq.consumer")

Handler = Callable[[Job], Awaitable[Any]]
Outcome = Literal["completed", "retried", "deferred", "dead", "cancelled", "lost"]


class Observer(Protocol):
    """Told what a consumer claimed and how each job settled (``echomq.metrics.Metrics`` is
    one). Called on the consumer's hot path: implementations must be quick and never raise."""

    def claimed(self, queue: str, jobs: Sequence[Job], lease_ms: int) -> None: ...

    def settled(self, queue: str, job: Job, outcome: Outcome) -> None: ...


class Retry(Exception):
    """Raise from a handler to retry the job after ``after`` seconds (counts as an attempt)."""

    def __init__(self, after: float, reason: str = "retry requested") -> None:
        super().__init__(reason)
        self.after = after


class Defer(Exception):
    """Raise from a handler to run the job again after ``after`` seconds without counting an
    attempt: the work was not tried (a budget said later), so it is no failure."""

    def __init__(self, after: float, reason: str = "deferred") -> None:
        super().__init__(reason)
        self.after = after


class Cool(Exception):
    """Raise from a handler when an upstream said "not before" for the job's whole lane (a
    429's ``retry_after``, a tenant's quota): the job goes back to its place in its lane
    without counting an attempt, and the lane leaves the ring for ``after`` seconds (or until
    the Unix time ``until``) for every worker, in one step; the other lanes keep being served.
    Checked when raised: :class:`~echomq.InvalidArgument` names the argument."""

    def __init__(
        self, after: float | None = None, reason: str | None = None, *, until: float | None = None
    ) -> None:
        cool_end(after, until, "after")
        super().__init__(reason or "cooling")
        self.after = after
        self.until = until
        self.reason = reason

    def seconds(self) -> float:
        """Seconds from now until the cool ends (host clock for ``until``)."""
        if self.after is not None:
            return self.after
        assert self.until is not None
        return max(self.until - time.time(), 0.0)


class Drop(Exception):
    """Raise from a handler to dead-letter the job at once with ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    """How a consumer works. Durations are seconds (``float``), as everywhere in echomq.

    Attributes:
        concurrency: jobs in hand at once.
        lease: seconds a claim holds a job before it may be reaped (extended while it runs).
        beat: seconds between upkeeps (promote, reap) and the longest park on the wake list.
        max_attempts: failed attempts in all before a job is dead.
        backoff: the delay before each retry (seconds, computed host-side).
        batch: most jobs per claim; ``None`` claims the free slots in one call.
        max_stalled: expired leases (crashes) a job survives before it is dead as ``stalled``.
        stop_timeout: seconds jobs in hand may take to finish after ``stop()``.
        upkeep: whether this consumer runs the upkeep (a metronome runs it for a pool).
        idle_upkeep: longest an idle consumer goes without upkeep, in seconds.
        claims_in_flight: most claims kept in flight at once on the connection.
    """

    concurrency: int = 10
    lease: float = 30.0
    beat: float = 1.0
    max_attempts: int = 3
    backoff: Backoff = field(default_factory=lambda: Jitter(Exponential(1.0, 60.0)))
    #: Most jobs per claim. ``None`` (the default) claims as many as there are free slots, in
    #: one call that walks the ring turn by turn (weights and ceilings hold as for single
    #: claims); 1 claims one job per call.
    batch: int | None = None
    max_stalled: int = 3
    stop_timeout: float = 30.0
    upkeep: bool = True
    #: Longest an idle consumer goes without upkeep (bounds how late a crashed peer's expired
    #: lease is reaped); otherwise upkeep runs when the engine says something falls due.
    idle_upkeep: float = 10.0
    #: Most claims one consumer keeps in flight at once (pipelined on its connection).
    claims_in_flight: int = 16

    def __post_init__(self) -> None:
        count(self.concurrency, "concurrency")
        count(self.claims_in_flight, "claims_in_flight", maximum=MAX_BATCH)
        if self.batch is not None:
            count(self.batch, "batch", maximum=MAX_BATCH)
        for name in ("max_attempts", "max_stalled"):
            count(getattr(self, name), name, maximum=MAX_ATTEMPTS)
        ms(self.lease, "lease", positive=True, most=MAX_LEASE)
        for name in ("beat", "stop_timeout", "idle_upkeep"):
            ms(getattr(self, name), name, positive=True)


@dataclass(slots=True)
class Tally:
    """What a consumer did since it started."""

    completed: int = 0
    retried: int = 0
    dead: int = 0
    lost: int = 0  # settles refused because the lease had moved on (the job is not lost)
    claims: int = 0
    deferred: int = 0
    cooled: int = 0  # jobs a handler's Cool put back (their lane cooled)
    cancelled: int = 0  # jobs a cancel stopped (or whose failure it kept from a retry)


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """What a consumer's failure policy decides for an attempt that raised: the error text the
    row keeps, the delay before the next attempt (seconds), the attempts allowed in all, and
    whether the traceback is worth an ERROR record and a place on the row."""

    error: str
    delay: float
    max_attempts: int
    traceback: bool = True


#: ``policy(job, exc)`` → the :class:`RetryPlan` of a failed attempt (say, per job type).
Policy = Callable[[Job, Exception], RetryPlan]


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def count_lost(tally: Tally, name: str, job: Job, verb: str, outcome: object) -> None:
    """A settle that did not take: the lease decides (it expires and the job is reaped and run
    again), nothing is lost."""
    tally.lost += 1
    log.warning("%s: could not %s job %s: %s", name, verb, job.id, outcome, extra=job_fields(job))


def count_complete(
    tally: Tally, name: str, job: Job, outcome: CompleteOutcome | EchoMQError
) -> Outcome:
    """Count the settler's answer for one completed job ("gone" counts: nothing to redo);
    shared by every consumer (the batch runner too)."""
    if isinstance(outcome, str) and outcome in ("completed", "gone"):
        tally.completed += 1
        return "completed"
    count_lost(tally, name, job, "complete", outcome)
    return "lost"


def count_retry(
    tally: Tally, name: str, failed: Failed, outcome: RetryOutcome | EchoMQError
) -> Outcome:
    """Count the settler's answer for one failed job: retried, dead (logged), cancelled (a
    cancel marked it while it ran: not retried) or lost."""
    if not isinstance(outcome, str) or outcome not in ("scheduled", "dead", "cancelled", "gone"):
        count_lost(tally, name, failed.job, "retry", outcome)
        return "lost"
    if outcome == "cancelled":
        tally.cancelled += 1
        return "cancelled"
    if outcome == "dead":
        tally.dead += 1
        job = failed.job
        log.warning(
            "%s: job %s is dead at attempt %d: %s",
            name, job.id, job.attempts, failed.error, extra=job_fields(job),
        )  # fmt: skip
        return "dead"
    tally.retried += 1
    return "retried"


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
        self._lease_ms = ms(self.options.lease, "lease")  # the claim's lease, as the engine got it
        self._third = self.options.lease / 3  # a lease is extended once a third of it went by
        self._loop: asyncio.AbstractEventLoop  # set by run
        self.tally = Tally()
        # Each job in hand, and when (monotonic) its lease is next due for extension.
        self._running: dict[asyncio.Task[None], tuple[Job, float]] = {}
        self._stopping = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._poked = asyncio.Event()
        self._blocker: Connector | None = None
        self._closing: asyncio.Future[None] | None = None
        # Under a metronome, the metronome runs the upkeep: share its cadence.
        self.cadence = (
            metronome.cadence
            if metronome is not None
            else Cadence(self.options.beat, self.options.idle_upkeep)
        )
        self._seen = 0  # the metronome's poke generation before the last claim
        # A finished handler hands its settle over and frees its slot; the settles of one
        # tick go out together, pipelined with the claim that fills the freed slots.
        self._settler = Settler(queue, self._completed, self._retried)

    # -- control -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Claim nothing more; jobs in hand finish (up to ``stop_timeout``); ``run`` returns."""
        self._stopping.set()
        self._poked.set()
        self._slot_freed.set()  # a loop waiting for a slot looks again
        if self._blocker is not None:
            # Abort a parked BLPOP now rather than at the end of its beat.
            self._closing = asyncio.ensure_future(self._blocker.close())

    @property
    def in_flight(self) -> int:
        return len(self._running)

    def poke(self) -> None:
        """The metronome's go-ahead: claim once."""
        self._poked.set()

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> Tally:
        """Work until :meth:`stop`; returns the tally."""
        options = self.options
        if self._stopping.is_set():  # stopped before it began: nothing to open or claim
            return self.tally
        if self.metronome is None:
            self._blocker = dedicated(self.queue.wire, self.queue.keys.wake)
            if not await open_wake(self._blocker, self._stopping.is_set):
                return self.tally
        # Subscribed before the first claim: a cancel of a job this consumer holds is heard.
        try:
            await self.queue._cancels.open()
        except BaseException:
            if self._blocker is not None:
                await self._blocker.close()
            raise
        self._loop = asyncio.get_running_loop()
        extender = asyncio.ensure_future(self._keep_leased())
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
                    await self._wait_for_slot()
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
                for outcome in outcomes:
                    if isinstance(outcome, BaseException):
                        failed, full = outcome, False
                    elif isinstance(outcome, tuple):
                        jobs, more = outcome
                        for job in jobs:
                            self._start(job)
                        if self.observer is not None and jobs:
                            self.observer.claimed(self.queue.name, jobs, self._lease_ms)
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
                    await self._sleep(min(options.beat, 1.0))
                elif limited is not None:
                    await self._sleep(limited.wait)
                else:
                    hint = False
        finally:
            extender.cancel()
            await self._finish()
        return self.tally

    async def _claim(self, size: int) -> tuple[list[Job], bool] | Empty | RateLimited:
        self.tally.claims += 1
        if self.metronome is not None:
            self._seen = self.metronome.generation
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
            self._poked.clear()
            self.metronome.register(self, self._seen)
            await self._poked.wait()
            return True
        now = time.monotonic()
        timeout = self.cadence.park_for(now) if self.options.upkeep else self.options.beat
        if empty.retry_in is not None:
            # A benched lane rejoins the ring by an upkeep (promote): run one as its window
            # ends, or claims find the ring empty until the next idle upkeep.
            self.cadence.soon(now, empty.retry_in)
            timeout = min(timeout, empty.retry_in)
        timeout = max(timeout, 0.001)
        assert self._blocker is not None
        try:
            token = await self._blocker.call_blocking(
                timeout, "BLPOP", self.queue.keys.wake, f"{timeout:.3f}"
            )
        except EchoMQError as exc:
            if not self._stopping.is_set():
                log.warning("%s: parking on %s failed: %s", self.name, self.queue.name, exc)
                await self._sleep(min(timeout, 1.0))
            return True
        if token is not None and token[1] == SCHEDULED_TOKEN:
            self.cadence.soon(time.monotonic())  # a job was scheduled: learn when it falls due
        # A benched lane's window ending (retry_in) is worth a claim even without a token.
        return token is not None or empty.retry_in is not None

    async def _sleep(self, seconds: float) -> None:
        await sleep_unless(self._stopping, seconds)

    async def _wait_for_slot(self) -> None:
        """Until a slot frees or a stop (each sets the event): one wait, no tasks."""
        self._slot_freed.clear()
        await self._slot_freed.wait()

    # -- one job -------------------------------------------------------------------------------

    def _start(self, job: Job) -> None:
        # No done callback: the task frees its slot as it ends (_execute), a loop turn sooner
        # and one scheduled callback fewer per job.
        task = self._loop.create_task(self._execute(job))
        self._running[task] = (job, time.monotonic() + self._third)

    async def _execute(self, job: Job) -> None:
        try:
            abort = _abort.begin()
            cancels = self.queue._cancels
            try:
                cancels.hold(job.id, abort.request)
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
                    result = self.queue._result_data(value)
                except InvalidArgument as exc:
                    self._crashed(job, exc)
                    return
                self._settler.complete(job, result)
        except Exception as exc:
            # A bug in settling itself: the job's lease will expire and it will be reaped (as
            # after a stop whose deadline passed: that CancelledError goes through).
            log.error(
                "%s: settling job %s failed: %s", self.name, job.id, describe(exc),
                extra=job_fields(job),
            )  # fmt: skip
        finally:
            # The slot frees as the task ends: no done callback to schedule per job.
            self._running.pop(asyncio.current_task(), None)  # type: ignore[arg-type]
            self._slot_freed.set()

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
            self._lost(job, "cancel", outcome)
        if self.observer is not None:
            self.observer.settled(
                self.queue.name, job, "cancelled" if outcome == "cancelled" else "lost"
            )

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
        failed = Failed(job, error[:2000], delay, max_attempts, traceback_text(formatted))
        try:
            ms(delay, "delay")  # checked here, so a bad delay costs this job alone
        except InvalidArgument as exc:
            self._retried(failed, exc)  # lost: its lease expires and it is run again
            return
        self._settler.retry(failed)

    def _completed(self, job: Job, outcome: CompleteOutcome | EchoMQError) -> None:
        """The settler's answer for one completed job ("gone" counts: nothing to redo)."""
        settled = count_complete(self.tally, self.name, job, outcome)
        if self.observer is not None:
            self.observer.settled(self.queue.name, job, settled)

    def _retried(self, failed: Failed, outcome: RetryOutcome | EchoMQError) -> None:
        """The settler's answer for one failed job."""
        settled = count_retry(self.tally, self.name, failed, outcome)
        if outcome == "scheduled" and failed.delay > 0:
            # Asked once the job is on the schedule, never before its write: an upkeep that
            # began in between would answer without it, and this request would be lost.
            self.cadence.soon(time.monotonic(), failed.delay)
        if self.observer is not None:
            self.observer.settled(self.queue.name, failed.job, settled)

    def _lost(self, job: Job, verb: str, outcome: str | EchoMQError) -> None:
        count_lost(self.tally, self.name, job, verb, outcome)

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

    # -- leases and stopping -------------------------------------------------------------------

    async def _keep_leased(self) -> None:
        """Extend, in one call, the leases of the jobs whose handler outlived a third of it.

        Measured on this host's monotonic clock from the claim: no host/server clock mixing.
        """
        third = self._third
        while True:
            await asyncio.sleep(min(third, self.options.beat))
            now = time.monotonic()
            due = {task: job for task, (job, at) in self._running.items() if at <= now}
            if not due:
                continue
            try:
                lost = set(await self.queue.extend_many(due.values(), lease=self.options.lease))
            except EchoMQError as exc:
                log.warning("%s: extending leases failed: %s", self.name, exc)
                continue
            for task, job in due.items():
                if task in self._running and job.id not in lost:
                    self._running[task] = (job, now + third)

    async def _finish(self) -> None:
        if self._running:
            tasks = list(self._running)
            _, late = await asyncio.wait(tasks, timeout=self.options.stop_timeout)
            for task in late:
                task.cancel()  # its lease expires and the job is reaped: not lost
            if late:
                await asyncio.wait(late)
        await self._settler.drain()
        await self.queue._cancels.release()
        if self._blocker is not None:
            await self._blocker.close()


# -- what every claim loop shares (Consumer, and the task layer's BatchConsumer) ----------------


async def upkeep_if_due(
    queue: Queue, cadence: Cadence, options: ConsumerOptions, name: str
) -> Upkeep | None:
    """Run ``queue``'s upkeep when ``cadence`` says something may be due (or a completion left
    flow entries for the relay); what it did, or None when it did not run or failed (logged,
    and tried again within a beat)."""
    now = time.monotonic()
    if queue.relay_due:  # a flow parent on another queue waits for this upkeep's relay
        cadence.soon(now)
    if not cadence.is_due(now):
        return None
    cadence.begin()
    try:
        done = await queue.upkeep(max_stalled=options.max_stalled)
    except EchoMQError as exc:
        log.warning("%s: upkeep of %s failed: %s", name, queue.name, exc)
        cadence.soon(now, options.beat)
        return None
    cadence.ran(now, done)
    return done


async def open_wake(blocker: Connector, is_stopping: Callable[[], bool]) -> bool:
    """Connect a loop's wake connection; False when a stop closed it while it was being made
    (a worker stopped at once, as a burst worker on an idle queue is): the loop then ends with
    nothing claimed, where the connect's ``Closed`` used to escape ``run``."""
    try:
        await blocker.connect()
    except WireError:
        if not is_stopping():
            raise
    if is_stopping():  # a stop during the connect, or between its last step and here
        await blocker.close()  # idempotent: the socket is gone when the loop returns
        return False
    return True


async def sleep_unless(stopping: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``stopping`` is set meanwhile."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)


async def first_of(*events: asyncio.Event) -> None:
    """Wait until any of ``events`` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()

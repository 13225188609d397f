"""Batch tasks, the worker side: :class:`BatchConsumer` serves the queue of one batch task. It
gathers a batch (claims up to ``max_size`` members; below ``min_size`` it parks on the wake list
for more, up to ``max_wait``), runs the handler on it, and settles each member by its verdict,
so one bad member never fails its batch-mates. The leases of every batch in hand are extended
together, in one call."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from echomq.consumers.cadence import SCHEDULED_TOKEN, Cadence
from echomq.consumers.consumer import (
    ConsumerOptions,
    Observer,
    Outcome,
    Tally,
    count_complete,
    count_lost,
    count_retry,
    describe,
    first_of,
    open_wake,
    sleep_unless,
    upkeep_if_due,
)
from echomq.consumers.log_fields import job_fields
from echomq.consumers.spans import run_batch
from echomq.engine.checks import MAX_BATCH, ms
from echomq.engine.results import CompleteOutcome, Empty, Failed, Job, RetryOutcome
from echomq.engine.settler import Settler
from echomq.errors import EchoMQError, InvalidArgument
from echomq.tasks.arguments import dump
from echomq.tasks.batch import BatchTask, Member, MemberVerdict
from echomq.wire.connector import Connector
from echomq.wire.pool import dedicated

if TYPE_CHECKING:
    from echomq.engine.queue import Queue
    from echomq.tasks.app import App

log = logging.getLogger("echomq.tasks")


@dataclass(slots=True)
class _Held:
    """One batch in hand (gathering or running): its jobs, and when (monotonic) their lease
    is next due for extension."""

    due: float
    jobs: list[Job] = field(default_factory=list)


def batch_task(app: App, queue: str) -> BatchTask[Any, Any] | None:
    """The batch task that owns ``queue`` (a batch task has a queue of its own), else None."""
    for task in app.tasks.values():
        if task.queue == queue and isinstance(task, BatchTask):
            return task
    return None


class BatchConsumer:
    """Serves one batch task's queue: up to ``batching.concurrency`` batches at once."""

    def __init__(
        self,
        queue: Queue,
        task: BatchTask[Any, Any],
        options: ConsumerOptions,
        *,
        observer: Observer | None = None,
    ) -> None:
        self.queue = queue
        self.task = task
        self.batching = task.batching
        self.options = options
        self.name = queue.name
        self.observer = observer
        self.tally = Tally()
        self.cadence = Cadence(options.beat, options.idle_upkeep)
        self._lease_ms = ms(options.lease, "lease")
        self._held: list[_Held] = []
        self._running: dict[asyncio.Task[None], _Held] = {}
        self._stopping = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._blocker: Connector | None = None
        self._closing: asyncio.Future[None] | None = None
        self._settler = Settler(queue, self._completed, self._retried)

    def stop(self) -> None:
        """Claim nothing more; batches in hand finish (up to ``stop_timeout``)."""
        self._stopping.set()
        if self._blocker is not None:
            self._closing = asyncio.ensure_future(self._blocker.close())

    @property
    def in_flight(self) -> int:
        """Members in hand, gathering or running."""
        return sum(len(held.jobs) for held in self._held)

    async def run(self) -> Tally:
        """Gather and run batches until :meth:`stop`; returns the tally (counted per member)."""
        if self._stopping.is_set():  # stopped before it began: nothing to open or claim
            return self.tally
        self._blocker = dedicated(self.queue.wire, self.queue.keys.wake)
        if not await open_wake(self._blocker, self._stopping.is_set):
            return self.tally
        extender = asyncio.ensure_future(self._keep_leased())
        try:
            while not self._stopping.is_set():
                await self._beat_if_due()
                if len(self._running) >= self.batching.concurrency:
                    await self._wait_for_slot()
                    continue
                held = await self._gather()
                if held is not None:
                    work = run_batch(self.queue, self.task.name, held.jobs, self._execute(held))
                    task = asyncio.ensure_future(work)
                    self._running[task] = held
                    task.add_done_callback(self._done)
        finally:
            extender.cancel()
            await self._finish()
        return self.tally

    # -- gathering -----------------------------------------------------------------------------

    async def _gather(self) -> _Held | None:
        """One batch: what one claim brings, and while below the minimum size, what the wake
        list announces within ``max_wait``. None when nothing was claimable."""
        batching = self.batching
        held = _Held(time.monotonic() + self.options.lease / 3)
        self._held.append(held)
        more = await self._claim(held)
        if not held.jobs:
            self._held.remove(held)
            if more is None:  # empty: park until a wake token, at most a beat
                now, options = time.monotonic(), self.options
                await self._park(self.cadence.park_for(now) if options.upkeep else options.beat)
            return None
        deadline = time.monotonic() + batching.max_wait
        while len(held.jobs) < batching.least and not self._stopping.is_set():
            now = time.monotonic()
            if now >= deadline:
                break
            if not more:
                # A lane emptied by our claim rejoins the ring, and pushes a wake token, when
                # a job is enqueued on it: parked, not polling.
                beat = self.cadence.park_for(now) if self.options.upkeep else self.options.beat
                await self._park(min(deadline - now, beat))
                if self._stopping.is_set():
                    break  # stopping: run what is in hand, claim nothing more
                await self._beat_if_due()
            more = bool(await self._claim(held))
        return held

    async def _claim(self, held: _Held) -> bool | None:
        """Claim up to the batch's room into ``held``: whether lanes remain serviceable; None
        when the answer was empty or rate-limited (or the claim failed)."""
        room = min(self.batching.max_size - len(held.jobs), MAX_BATCH)
        self.tally.claims += 1
        try:
            outcome = await self.queue.claim_some(room, self.options.lease)
        except EchoMQError as exc:
            log.warning("%s: claim on %s failed: %s", self.name, self.queue.name, exc)
            await self._sleep(min(self.options.beat, 1.0))
            return None
        if not isinstance(outcome, tuple):
            if isinstance(outcome, Empty):
                if outcome.retry_in is not None:  # a benched lane rejoins by an upkeep
                    self.cadence.soon(time.monotonic(), outcome.retry_in)
            elif not held.jobs:
                await self._sleep(outcome.wait)  # rate-limited, nothing in hand: wait it out
            return None
        jobs, more = outcome
        held.jobs.extend(jobs)
        if self.observer is not None and jobs:
            self.observer.claimed(self.queue.name, jobs, self._lease_ms)
        return more

    async def _park(self, timeout: float) -> None:
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
            return
        if token is not None and token[1] == SCHEDULED_TOKEN:
            self.cadence.soon(time.monotonic())

    async def _beat_if_due(self) -> None:
        if self.options.upkeep:
            await upkeep_if_due(self.queue, self.cadence, self.options, self.name)

    # -- running and settling ------------------------------------------------------------------

    async def _execute(self, held: _Held) -> None:
        members = self._members(held.jobs)
        if not members:
            return
        task = self.task
        try:
            if task.timeout is None:
                verdicts = await task.batch_fn(members)
            else:
                async with asyncio.timeout(task.timeout):
                    verdicts = await task.batch_fn(members)
        except asyncio.CancelledError:
            raise  # stop's deadline passed: the leases expire and the members are reaped
        except TimeoutError:
            self._fail_all(members, "timeout", None)
            return
        except Exception as exc:
            log.error(
                "%s: batch of %d (%s) failed: %s; every member is retried",
                self.name, len(members), task.name, describe(exc), exc_info=exc,
            )  # fmt: skip
            self._fail_all(members, describe(exc), "".join(traceback.format_exception(exc)))
            return
        if verdicts is None:
            for member in members:
                self._complete(member, None)
            return
        matched = _match(members, verdicts)
        if matched is None:
            error = f"batch handler returned {_count(verdicts)} verdicts for {len(members)} members"
            log.error("%s: %s (%s); every member is retried", self.name, error, task.name)
            self._fail_all(members, error, None)
            return
        for member, verdict in matched:
            if verdict.kind == "done":
                self._complete(member, verdict.result)
            elif verdict.kind == "retry":
                delay = verdict.delay
                self._fail(member, verdict.reason, self._delay(member) if delay is None else delay)
            else:
                self._fail(member, verdict.reason, 0.0, max_attempts=1)

    def _members(self, jobs: list[Job]) -> list[Member[Any]]:
        """The jobs as members; a job that is no member of this task is settled here."""
        members: list[Member[Any]] = []
        task = self.task
        for job in jobs:
            payload = job.payload
            name = payload.get("task") if isinstance(payload, dict) else None
            if name != task.name:
                # A job of another task on a batch task's queue: retried up to the worker's
                # attempts (in a rolling deploy a newer worker may know it), then dead.
                log.error(
                    "job %s: task %s on the queue of batch task %s",
                    job.id, name, task.name, extra=job_fields(job),
                )  # fmt: skip
                member = Member(job.id, None, job.lane, job.attempts, job)
                self._fail(
                    member, f"unknown task {name}", self._delay(member), self.options.max_attempts
                )
                continue
            try:
                args, kwargs = task.signature.load(payload.get("args", {}))
            except InvalidArgument as exc:
                member = Member(job.id, None, job.lane, job.attempts, job)
                self._fail(member, f"bad arguments: {exc.reason}", 0.0, max_attempts=1)
                continue
            item = args[0] if args else kwargs.get("item")
            members.append(Member(job.id, item, job.lane, job.attempts, job))
        return members

    def _delay(self, member: Member[Any]) -> float:
        backoff = self.task.backoff or self.options.backoff
        return backoff.delay(member.attempts)

    def _complete(self, member: Member[Any], result: Any) -> None:
        assert member.job is not None
        try:
            data = self.queue._result_data(dump(result, argument="result"))
        except InvalidArgument as exc:
            self._fail(member, describe(exc), self._delay(member))
            return
        self._settler.complete(member.job, data)

    def _fail_all(self, members: list[Member[Any]], error: str, formatted: str | None) -> None:
        for member in members:
            self._fail(member, error, self._delay(member), formatted=formatted)

    def _fail(
        self,
        member: Member[Any],
        error: str,
        delay: float,
        max_attempts: int | None = None,
        formatted: str | None = None,
    ) -> None:
        assert member.job is not None
        most = max_attempts or self.task.max_attempts or self.options.max_attempts
        self._settler.retry(Failed(member.job, error[:2000], delay, most, formatted))

    def _completed(self, job: Job, outcome: CompleteOutcome | EchoMQError) -> None:
        self._observe(job, count_complete(self.tally, self.name, job, outcome))

    def _retried(self, failed: Failed, outcome: RetryOutcome | EchoMQError) -> None:
        settled = count_retry(self.tally, self.name, failed, outcome)
        if outcome == "scheduled" and failed.delay > 0:
            self.cadence.soon(time.monotonic(), failed.delay)  # promote it when it falls due
        self._observe(failed.job, settled)

    def _observe(self, job: Job, outcome: Outcome) -> None:
        if self.observer is not None:
            self.observer.settled(self.queue.name, job, outcome)

    def _lost(self, job: Job, verb: str, outcome: str | EchoMQError) -> None:
        count_lost(self.tally, self.name, job, verb, outcome)

    # -- leases and stopping -------------------------------------------------------------------

    async def _keep_leased(self) -> None:
        """Extend the leases of every batch in hand that outlived a third of its lease: all
        their members in one call, so a batch's members share one new deadline."""
        third = self.options.lease / 3
        while True:
            await asyncio.sleep(min(third, self.options.beat))
            now = time.monotonic()
            due = [held for held in self._held if held.due <= now and held.jobs]
            if not due:
                continue
            jobs = [job for held in due for job in held.jobs]
            try:
                lost = set(await self.queue.extend_many(jobs, lease=self.options.lease))
            except EchoMQError as exc:
                log.warning("%s: extending leases failed: %s", self.name, exc)
                continue
            for held in due:
                held.due = now + third
            if lost:
                log.warning("%s: %d leases could not be extended", self.name, len(lost))

    def _done(self, task: asyncio.Task[None]) -> None:
        held = self._running.pop(task, None)
        if held is not None:
            self._held.remove(held)
        self._slot_freed.set()
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("%s: settling a batch failed: %s", self.name, describe(exc))

    async def _sleep(self, seconds: float) -> None:
        await sleep_unless(self._stopping, seconds)

    async def _wait_for_slot(self) -> None:
        self._slot_freed.clear()
        await first_of(self._stopping, self._slot_freed)

    async def _finish(self) -> None:
        if self._running:
            tasks = list(self._running)
            _, late = await asyncio.wait(tasks, timeout=self.options.stop_timeout)
            for task in late:
                task.cancel()  # the leases expire and the members are reaped: not lost
            if late:
                await asyncio.wait(late)
        await self._settler.drain()
        if self._closing is not None:
            await self._closing
        if self._blocker is not None:
            await self._blocker.close()


def _match(
    members: list[Member[Any]], verdicts: object
) -> list[tuple[Member[Any], MemberVerdict[Any]]] | None:
    """Each member with its verdict (matched by id, in any order); None unless there is
    exactly one verdict per member."""
    if not isinstance(verdicts, Sequence) or len(verdicts) != len(members):
        return None
    by_id = {member.id: member for member in members}
    matched: list[tuple[Member[Any], MemberVerdict[Any]]] = []
    for verdict in verdicts:
        if not isinstance(verdict, MemberVerdict) or verdict.id not in by_id:
            return None
        matched.append((by_id.pop(verdict.id), verdict))
    return matched


def _count(verdicts: object) -> str:
    return str(len(verdicts)) if isinstance(verdicts, Sequence) else "no list of"

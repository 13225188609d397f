"""Batch tasks, the worker side: :class:`BatchRunner` is what a batch task plugs into the
:class:`~echomq.consumers.batch.BatchConsumer` that serves its queue. It runs the task's
handler on a batch (its jobs as :class:`Member`), and settles each member by its verdict, so
one bad member never fails its batch-mates."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from echomq.consumers.ledger import Ledger, describe
from echomq.consumers.log_fields import job_fields
from echomq.consumers.options import ConsumerOptions
from echomq.engine.results import Job
from echomq.errors import InvalidArgument
from echomq.tasks.arguments import dump
from echomq.tasks.batch import BatchTask, Member, MemberVerdict

if TYPE_CHECKING:
    from echomq.tasks.app import App

log = logging.getLogger("echomq.tasks")


def batch_task(app: App, queue: str) -> BatchTask[Any, Any] | None:
    """The batch task that owns ``queue`` (a batch task has a queue of its own), else None."""
    for task in app.tasks.values():
        if task.queue == queue and isinstance(task, BatchTask):
            return task
    return None


class BatchRunner:
    """Runs ``task``'s handler on one batch and settles its members (``options``: the worker's,
    for the attempts and backoff a task leaves unsaid)."""

    def __init__(self, task: BatchTask[Any, Any], options: ConsumerOptions) -> None:
        self.task = task
        self.options = options

    async def __call__(self, jobs: list[Job], ledger: Ledger) -> None:
        members = self._members(jobs, ledger)
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
            self._fail_all(ledger, members, "timeout", None)
            return
        except Exception as exc:
            log.error(
                "%s: batch of %d (%s) failed: %s; every member is retried",
                task.queue, len(members), task.name, describe(exc), exc_info=exc,
            )  # fmt: skip
            formatted = "".join(traceback.format_exception(exc))
            self._fail_all(ledger, members, describe(exc), formatted)
            return
        if verdicts is None:
            for member in members:
                self._complete(ledger, member, None)
            return
        matched = _match(members, verdicts)
        if matched is None:
            error = f"batch handler returned {_count(verdicts)} verdicts for {len(members)} members"
            log.error("%s: %s (%s); every member is retried", task.queue, error, task.name)
            self._fail_all(ledger, members, error, None)
            return
        for member, verdict in matched:
            if verdict.kind == "done":
                self._complete(ledger, member, verdict.result)
            elif verdict.kind == "retry":
                delay = self._delay(member) if verdict.delay is None else verdict.delay
                self._fail(ledger, member, verdict.reason, delay)
            else:
                self._fail(ledger, member, verdict.reason, 0.0, max_attempts=1)

    def _members(self, jobs: list[Job], ledger: Ledger) -> list[Member[Any]]:
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
                    ledger,
                    member,
                    f"unknown task {name}",
                    self._delay(member),
                    self.options.max_attempts,
                )
                continue
            try:
                args, kwargs = task.signature.load(payload.get("args", {}))
            except InvalidArgument as exc:
                member = Member(job.id, None, job.lane, job.attempts, job)
                self._fail(ledger, member, f"bad arguments: {exc.reason}", 0.0, max_attempts=1)
                continue
            item = args[0] if args else kwargs.get("item")
            members.append(Member(job.id, item, job.lane, job.attempts, job))
        return members

    def _delay(self, member: Member[Any]) -> float:
        backoff = self.task.backoff or self.options.backoff
        return backoff.delay(member.attempts)

    def _complete(self, ledger: Ledger, member: Member[Any], result: Any) -> None:
        assert member.job is not None
        try:
            ledger.complete(member.job, dump(result, argument="result"))
        except InvalidArgument as exc:
            self._fail(ledger, member, describe(exc), self._delay(member))

    def _fail_all(
        self, ledger: Ledger, members: list[Member[Any]], error: str, formatted: str | None
    ) -> None:
        for member in members:
            self._fail(ledger, member, error, self._delay(member), formatted=formatted)

    def _fail(
        self,
        ledger: Ledger,
        member: Member[Any],
        error: str,
        delay: float,
        max_attempts: int | None = None,
        formatted: str | None = None,
    ) -> None:
        assert member.job is not None
        most = max_attempts or self.task.max_attempts or self.options.max_attempts
        ledger.fail(member.job, error, delay, most, formatted)


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

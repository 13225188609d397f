"""Handles on enqueued tasks: the job's id and verdict, its status, progress and log, and its
result once it is kept (the queue's ``wait`` on the done channel: no polling), rebuilt from the
task's return annotation. :class:`Handle` awaits; :class:`SyncHandle` blocks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from echomq.engine.cancels import cancel_reason
from echomq.engine.checks import MAX_LIMIT, count, ms
from echomq.engine.results import FINISHED, Cancellation, JobInfo, Verdict
from echomq.engine.waiters import through_cuts
from echomq.errors import ResultMissing, ResultTimeout, TaskCancelled, TaskFailed

if TYPE_CHECKING:
    from echomq.engine.eta import Eta
    from echomq.engine.queue import Queue
    from echomq.engine.sync_queue import SyncQueue
    from echomq.tasks.task import Task

R = TypeVar("R")

#: A worker's job's log lines here: none (one shared value, not a list per handle).
_NO_LINES: tuple[str, ...] = ()

#: Seconds a result's last read (after the wait ended) rides out a dropped socket.
FALLBACK_GRACE: Final = 5.0


class _Base(Generic[R]):
    __slots__ = ("_info", "_lines", "task", "verdict")

    def __init__(
        self,
        task: Task[Any, R],
        verdict: Verdict,
        info: JobInfo | None = None,
        lines: list[str] | None = None,
    ) -> None:
        self.task = task
        self.verdict = verdict
        # An eager run's row and log, known at once; a worker's are read from the queue.
        self._info = info
        self._lines: Sequence[str] = lines or _NO_LINES

    @property
    def id(self) -> str:
        """The job that holds the work (for a duplicate, the job that was there first)."""
        return self.verdict.id

    @property
    def ran(self) -> JobInfo | None:
        """An eager run's outcome, its row as a worker's would read (known at once); None for a
        job on a worker (read it with ``info()``)."""
        return self._info

    @property
    def ran_lines(self) -> list[str]:
        """An eager run's log lines (empty for a job on a worker)."""
        return list(self._lines)

    @property
    def duplicate_of(self) -> str | None:
        """For a duplicate, the job that was there first (``verdict.state`` says what it was
        doing when this enqueue found it); None when this enqueue admitted the work."""
        return self.verdict.id if self.verdict.kind == "duplicate" else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.task.name!r}, {self.id!r}, {self.verdict.kind!r})"

    def _eager_result(self, timeout: float | None) -> R:
        """An eager run's (or a queue-less handle's) result, its timeout checked as live."""
        if timeout is not None:
            ms(timeout, "timeout")
        return self._resolve(self._info, timeout)

    def _eager_cancel(self, reason: str) -> Cancellation:
        cancel_reason(reason)  # refused as a live cancel refuses it
        return Cancellation(self.id, self._info.state if self._info else "absent")

    def _eager_logs(self, limit: int) -> list[str]:
        return list(self._lines[-count(limit, "limit", maximum=MAX_LIMIT) :])

    def _refused(self) -> None:
        if self.verdict.kind in ("error", "rejected") and self.verdict.error is not None:
            raise self.verdict.error  # nothing was admitted: there is nothing to wait for

    def _resolve(self, info: JobInfo | None, timeout: float | None) -> R:
        if info is None:
            raise ResultMissing(self.id)
        if info.state == "completed":
            result: R = self.task.signature.result(info.result)
            return result
        if info.state == "dead":
            raise TaskFailed(self.id, self.task.name, info.last_error or "", info.traceback)
        if info.state == "cancelled":
            raise TaskCancelled(self.id, self.task.name, info.cancel or "")
        raise ResultTimeout(self.id, timeout, info.state)


class Handle(_Base[R]):
    """An enqueued task, seen from asyncio code."""

    __slots__ = ("_queue",)

    def __init__(
        self,
        task: Task[Any, R],
        verdict: Verdict,
        queue: Queue | None,
        info: JobInfo | None = None,
        lines: list[str] | None = None,
    ) -> None:
        # The base's fields set here, not through super(): a batch makes one handle per item.
        self.task = task
        self.verdict = verdict
        self._info = info
        self._lines = lines or _NO_LINES
        self._queue = queue

    @property
    def queue(self) -> Queue | None:
        """The queue the job is on (None in eager mode: it ran here)."""
        return self._queue

    async def result(self, timeout: float | None = None) -> R:
        """The task's return value, once a worker ran it (at most ``timeout`` seconds).

        Raises :class:`TaskFailed` when the job is dead, :class:`TaskCancelled` when it was
        cancelled, :class:`ResultTimeout` when it has not
        finished in time, :class:`ResultMissing` when it has no row (its result was not kept).
        """
        if self._info is not None or self._queue is None:
            return self._eager_result(timeout)
        self._refused()
        queue = self._queue
        info = await queue.wait(self.id, timeout)
        if info is None or info.state not in FINISHED:
            # Why there was none: still running (a timeout), or no row at all; a finish just
            # after the timeout is read here too. The wait rode out cuts until its deadline;
            # this one read rides them out for a few seconds more rather than answer a cut.
            grace = asyncio.get_running_loop().time() + FALLBACK_GRACE
            info = await through_cuts(lambda: queue.job(self.id), grace)
        return self._resolve(info, timeout)

    async def cancel(self, reason: str = "") -> Cancellation:
        """Cancel the task's job (:meth:`Queue.cancel`): pending or scheduled, it ends now;
        running, its worker cancels the handler within a beat. :meth:`result` then raises
        :class:`TaskCancelled`. An eager run has finished already: ``finished``."""
        if self._info is not None or self._queue is None:
            return self._eager_cancel(reason)
        self._refused()
        return await self._queue.cancel(self.id, reason)

    async def status(self) -> JobInfo | None:
        """The job's row now (state, attempts, last error, result), or None when absent."""
        if self._info is not None or self._queue is None:
            return self._info
        return await self._queue.job(self.id)

    async def progress(self) -> Any:
        """The latest progress the task reported (``context().progress``), decoded; None when
        it reported none, or the job has no row."""
        info = await self.status()
        return None if info is None else info.progress

    async def logs(self, limit: int = 100) -> list[str]:
        """The newest ``limit`` lines the task logged (``context().log``), oldest first."""
        if self._info is not None or self._queue is None:
            return self._eager_logs(limit)
        return await self._queue.logs(self.id, limit)

    async def position(self) -> Eta | None:
        """Where the job stands while it waits in its lane: jobs ahead of it and its
        estimated wait until a claim (:meth:`Queue.position`); None once it is claimed,
        scheduled, finished, or ran eagerly."""
        if self._info is not None or self._queue is None:
            return None
        self._refused()
        return await self._queue.position(self.id)


class SyncHandle(_Base[R]):
    """An enqueued task, seen from blocking code (``task.enqueue_sync``)."""

    __slots__ = ("_queue",)

    def __init__(
        self,
        task: Task[Any, R],
        verdict: Verdict,
        queue: SyncQueue | None,
        info: JobInfo | None = None,
        lines: list[str] | None = None,
    ) -> None:
        super().__init__(task, verdict, info, lines)
        self._queue = queue

    def result(self, timeout: float | None = None) -> R:
        """:meth:`Handle.result`, blocking."""
        if self._info is not None or self._queue is None:
            return self._eager_result(timeout)
        self._refused()
        info = self._queue.wait(self.id, timeout)
        if info is None or info.state not in FINISHED:
            info = self._queue.job(self.id)
        return self._resolve(info, timeout)

    def cancel(self, reason: str = "") -> Cancellation:
        """:meth:`Handle.cancel`, blocking."""
        if self._info is not None or self._queue is None:
            return self._eager_cancel(reason)
        self._refused()
        return self._queue.cancel(self.id, reason)

    def status(self) -> JobInfo | None:
        """:meth:`Handle.status`, blocking."""
        if self._info is not None or self._queue is None:
            return self._info
        return self._queue.job(self.id)

    def progress(self) -> Any:
        """:meth:`Handle.progress`, blocking."""
        info = self.status()
        return None if info is None else info.progress

    def logs(self, limit: int = 100) -> list[str]:
        """:meth:`Handle.logs`, blocking."""
        if self._info is not None or self._queue is None:
            return self._eager_logs(limit)
        return self._queue.logs(self.id, limit)

    def position(self) -> Eta | None:
        """:meth:`Handle.position`, blocking."""
        if self._info is not None or self._queue is None:
            return None
        self._refused()
        return self._queue.position(self.id)

"""What a running task can ask about itself and tell: ``echomq.context()`` inside a task returns
its :class:`Context` (the job, its attempt, the worker's shared state, the app; its progress and
log lines reported through it); and the outcome that ``after_job`` hooks are given."""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from echomq.engine.flows import Children
from echomq.engine.ids import Minter
from echomq.engine.progress import LOG_KEEP, log_lines, progress_json
from echomq.engine.results import Job

if TYPE_CHECKING:
    from echomq.tasks.app import App

#: A running task's context before anything asked for it: :class:`Context`'s fields, in order.
#: A worker sets this and ``context()`` builds the Context at its first call, so the many tasks
#: that never ask pay for a tuple, not for a frozen dataclass.
Pending = tuple[Job, str, dict[str, Any], "App", "Trail | None", Children | None]

#: The running task's context (a context variable, not module state: each running task sees its
#: own value). Set by one attempt's execution (:func:`echomq.tasks.execution.execute`, or the
#: worker's dispatcher for an attempt with no hooks and no timeout), read by :func:`current`.
RUNNING: ContextVar[Context | Pending] = ContextVar("echomq.context")

#: The ids of jobs run here, not on a server (eager mode, a batch task called directly): they
#: never reach a server, so any id node will do.
LOCAL_IDS = Minter(0)


@dataclass(slots=True)
class Trail:
    """What an eager run reported, kept here (there is no row): its progress and its log."""

    progress: Any = None
    lines: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Context:
    """The running task's job and surroundings. ``state`` is the dict the worker's startup
    hooks filled (shared by every task of the process)."""

    job: Job
    task: str
    state: dict[str, Any] = field(repr=False)
    app: App = field(repr=False)
    #: An eager run's record (None on a worker: reports go to the job's row and log).
    trail: Trail | None = field(default=None, repr=False, compare=False)
    #: A flow parent's children: their ids, results and errors (None: the task is no parent).
    children: Children | None = field(default=None, repr=False, compare=False)

    @property
    def attempt(self) -> int:
        """1 on the first run, 2 on the first retry, ... (the job's fencing token)."""
        return self.job.attempts

    async def progress(self, value: Any) -> bool:
        """Report the job's progress: a small JSON value (a number, or a dict such as
        ``{"done": 3, "of": 10}``; at most 1 KiB encoded), kept on its row and published as a
        ``progress`` event (:meth:`Queue.progress`, fenced by this attempt's token). False when
        this attempt no longer holds the job."""
        if self.trail is not None:
            self.trail.progress = json.loads(progress_json(value))
            return True
        return await self.app.queue(self.job.queue).progress(self.job, value=value)

    async def log(self, line: str) -> bool:
        """Append a line (at most 1 KiB) to the job's log, which keeps its newest 100 lines
        (:meth:`Queue.logs`, a handle's ``logs()``), and publish it as a ``log`` event."""
        lines = log_lines(line)
        if self.trail is not None:
            self.trail.lines = (self.trail.lines + lines)[-LOG_KEEP:]
            return True
        return await self.app.queue(self.job.queue).progress(self.job, log=lines)


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """How one attempt ended, as ``after_job`` hooks see it: a result, or the error raised."""

    result: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def context() -> Context:
    """The running task's :class:`Context`; ``LookupError`` outside a running task."""
    found = current()
    if found is None:
        raise LookupError("echomq.context() is only available inside a running task")
    return found


def current() -> Context | None:
    """The running task's :class:`Context`, or None outside a running task."""
    found = RUNNING.get(None)
    if type(found) is tuple:
        found = Context(*found)
        RUNNING.set(found)  # built once: this task's later calls get the same one
    return found  # type: ignore[return-value]

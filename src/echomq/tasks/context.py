"""What a running task can ask about itself: ``echomq.context()`` inside a task returns its
:class:`Context` (the job, its attempt, the worker's shared state, the app); and the outcome
that ``after_job`` hooks are given."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._results import Job

if TYPE_CHECKING:
    from .app import App

# A context variable, not module state: each running task sees its own value.
_current: ContextVar[Context] = ContextVar("echomq.context")


@dataclass(frozen=True, slots=True)
class Context:
    """The running task's job and surroundings. ``state`` is the dict the worker's startup
    hooks filled (shared by every task of the process)."""

    job: Job
    task: str
    state: dict[str, Any] = field(repr=False)
    app: App = field(repr=False)

    @property
    def attempt(self) -> int:
        """1 on the first run, 2 on the first retry, ... (the job's fencing token)."""
        return self.job.attempts


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
    try:
        return _current.get()
    except LookupError:
        raise LookupError("echomq.context() is only available inside a running task") from None

"""Tasks: typed functions registered with an :class:`App`, enqueued as JSON jobs and run by an
:class:`AppWorker` (``echomq worker myapp:app``), with results read through handles."""

from .app import App, Hooks
from .context import Context, TaskOutcome, context
from .handle import Handle, SyncHandle
from .periodic import Schedule
from .runtime import AppWorker, serve_tasks
from .task import Call, Task

__all__ = [
    "App",
    "AppWorker",
    "Call",
    "Context",
    "Handle",
    "Hooks",
    "Schedule",
    "SyncHandle",
    "Task",
    "TaskOutcome",
    "context",
    "serve_tasks",
]

"""Tasks: typed functions registered with an :class:`App`, enqueued as JSON jobs and run by an
:class:`AppWorker` (``echomq worker myapp:app``), with results read through handles."""

from echomq.tasks.app import App, Hooks
from echomq.tasks.batch import Batching, BatchTask, Member, MemberVerdict
from echomq.tasks.canvas import FlowHandle, TaskFlow, chain, flow, group
from echomq.tasks.context import Context, TaskOutcome, context
from echomq.tasks.handle import Handle, SyncHandle
from echomq.tasks.periodic import Schedule
from echomq.tasks.runtime import AppWorker, serve_tasks
from echomq.tasks.task import Call, Task

__all__ = [
    "App",
    "AppWorker",
    "BatchTask",
    "Batching",
    "Call",
    "Context",
    "FlowHandle",
    "Handle",
    "Hooks",
    "Member",
    "MemberVerdict",
    "Schedule",
    "SyncHandle",
    "Task",
    "TaskFlow",
    "TaskOutcome",
    "chain",
    "context",
    "flow",
    "group",
    "serve_tasks",
]

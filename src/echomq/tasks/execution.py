"""One attempt of a task, the same on a worker and in eager mode: its context, the app's job
hooks around it, the task's per-attempt timeout, and the error text a failure leaves as
``last_error``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from echomq.consumers.consumer import describe as _describe
from echomq.engine.flows import Children
from echomq.engine.results import Job
from echomq.tasks.arguments import dump
from echomq.tasks.context import RUNNING, Context, TaskOutcome, Trail

if TYPE_CHECKING:
    from echomq.tasks.app import AfterHook, App, BeforeHook
    from echomq.tasks.task import Task


#: Result types that are their own JSON shape (exact types: a subclass goes through ``dump``).
PLAIN = frozenset((str, int, float, bool))


class TaskTimeout(Exception):
    """An attempt outlived its task's ``timeout``: it was cancelled (error text ``timeout``)."""

    def __init__(self, seconds: float) -> None:
        super().__init__("timeout")
        self.seconds = seconds


class Unrunnable(Exception):
    """A job no attempt can run (arguments that do not bind, a payload that is no task): dead
    at once, its ``last_error`` the reason alone."""


class UnknownTask(Unrunnable):
    """A job of a task this worker does not have. Retried with the backoff up to the worker's
    attempts, not dead at once: in a rolling deploy an older worker meets a newer task, and a
    newer worker takes the job on a later attempt."""


def error_text(exc: BaseException) -> str:
    """A failed attempt's ``last_error``: ``timeout``, the reason a job cannot run, or
    ``Type: message``."""
    if isinstance(exc, TaskTimeout | Unrunnable):
        return str(exc)
    return _describe(exc)


async def execute(
    app: App,
    task: Task[Any, Any],
    job: Job,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    state: dict[str, Any],
    trail: Trail | None = None,
    children: Children | None = None,
) -> Any:
    """Run one attempt in its context, between the app's job hooks; the result as JSON values.
    ``trail`` keeps an eager run's reports (a worker's go to the job's row and log);
    ``children`` is a flow parent's."""
    hooks = app.hooks
    befores: Sequence[BeforeHook] = hooks.before_job
    afters: Sequence[AfterHook] = hooks.after_job
    if befores or afters:
        ctx = Context(job, task.name, state, app, trail, children)
        token = RUNNING.set(ctx)
    else:
        # No hook takes it: the Context is built only if the task asks (``context()``).
        token = RUNNING.set((job, task.name, state, app, trail, children))
        befores = afters = ()  # a hook added while this attempt runs waits for the next
    try:
        # The hook loops, their outcomes and the timeout's coroutine only when there are any.
        for before in befores:
            await before(ctx)
        try:
            # Awaited here without a timeout (one coroutine less per job on the hot path).
            if task.timeout is None:
                result = await task.fn(*args, **kwargs)
            else:
                result = await _attempt(task, args, kwargs)
        except Exception as exc:
            for after in afters:
                await after(ctx, TaskOutcome(error=exc))
            raise
        for after in afters:
            await after(ctx, TaskOutcome(result=result))
        if result is None or type(result) in PLAIN:
            return result  # its own dump: no walk
        return dump(result, argument="result")
    finally:
        RUNNING.reset(token)


async def _attempt(task: Task[Any, Any], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    assert task.timeout is not None
    scope = asyncio.timeout(task.timeout)
    try:
        async with scope:
            return await task.fn(*args, **kwargs)
    except TimeoutError:
        if scope.expired():
            raise TaskTimeout(task.timeout) from None
        raise  # the task's own TimeoutError: an ordinary failure


def received(arguments: Any, receive: Any, children: Children) -> Any:
    """A receiving parent's arguments with its children's results in its receiving parameter:
    ``receive`` is ``[parameter, "one" | "all"]`` (the one child's result, or all in order)."""
    if not isinstance(arguments, dict) or not isinstance(receive, list) or len(receive) != 2:
        return arguments
    name, gather = receive
    results = children.ordered()
    value = results if gather == "all" else (results[0] if results else None)
    return {**arguments, str(name): value}

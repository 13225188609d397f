"""Eager mode: an enqueued task runs inline, for unit tests with no server. It makes the trip
a worker's job makes (the payload and the result through the codec, the context and the job
hooks), once: a failure is the dead job's, with its error and traceback."""

from __future__ import annotations

import asyncio
import threading
import time
import traceback
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from echomq.engine.flows import Children, FlowIds
from echomq.engine.keys import DEFAULT_GROUP, validate_dedup, validate_group
from echomq.engine.results import Job, JobInfo, Verdict
from echomq.errors import InvalidArgument, TaskFailed
from echomq.tasks.canvas import FlowHandle, TaskFlow, checked
from echomq.tasks.context import LOCAL_IDS, Trail
from echomq.tasks.execution import error_text, execute, received
from echomq.tasks.handle import Handle, SyncHandle
from echomq.tasks.producer import Producer
from echomq.tasks.task import Call, as_args

if TYPE_CHECKING:
    from echomq.tasks.app import App

R = TypeVar("R")


class EagerProducer(Producer):
    """The producer of eager mode (``app.eager_mode()``): each call runs here, at once, and its
    handle holds the outcome; ``propagate`` raises a failure from the enqueue instead."""

    def __init__(self, app: App, propagate: bool = False) -> None:
        super().__init__(app)
        self.propagate = propagate

    async def enqueue_call(self, call: Call[R]) -> Handle[R]:
        call.options.check()  # eager runs at once, but bad options are refused as live
        return await run(self.app, call, propagate=self.propagate)

    async def enqueue_many(self, calls: list[Call[Any]]) -> list[Handle[Any]]:
        return [await self.enqueue_call(call) for call in calls]

    async def enqueue_flow(self, flow: TaskFlow[R]) -> FlowHandle[R]:
        """The flow run here, children first, each parent given what its children left: a
        dead child fails its parent (its error names the child) unless the policy ignores it."""
        checked(flow)  # the checks a worker's flow gets, before anything runs
        handle, ids = await self._run_node(flow)
        return FlowHandle(handle, ids)

    def enqueue_call_sync(self, call: Call[R]) -> SyncHandle[R]:
        handle = blocking(self.enqueue_call(call))
        return SyncHandle(call.task, handle.verdict, None, handle.ran, handle.ran_lines)

    async def _run_node(self, node: TaskFlow[Any] | Call[Any]) -> tuple[Handle[Any], FlowIds]:
        app, propagate = self.app, self.propagate
        if not isinstance(node, TaskFlow):
            handle = await run(app, node, propagate=propagate)
            return handle, FlowIds(handle.id, node.task.queue)
        done = [await self._run_node(child) for child in node.children]
        results: dict[str, Any] = {}
        failed: dict[str, str] = {}
        for child, _ in done:
            info = child.ran
            assert info is not None
            if info.state == "completed":
                results[child.id] = info.result
            else:
                failed[child.id] = info.last_error or ""
        children = Children(tuple(child.id for child, _ in done), results, failed)
        call = node.parent
        kids = tuple(ids for _, ids in done)
        if failed and node.on_failure == "fail_parent":
            first = next(iter(failed))
            job_id = call.id or LOCAL_IDS.mint("JOB")
            error = f"child {first} failed: {failed[first]}"
            if propagate:
                raise TaskFailed(job_id, call.task.name, error, None)
            info = JobInfo(
                job_id, "dead", 0, call.payload, call.lane or DEFAULT_GROUP, last_error=error,
                finished=time.time(),
            )  # fmt: skip
            return Handle(call.task, Verdict("enqueued", job_id), None, info), FlowIds(
                job_id, call.task.queue, kids
            )
        handle = await run(app, call, children, node.gather, propagate=propagate)
        return handle, FlowIds(handle.id, call.task.queue, kids)


async def run(
    app: App,
    call: Call[R],
    children: Children | None = None,
    gather: str | None = None,
    *,
    propagate: bool = False,
) -> Handle[R]:
    """Run ``call`` here and now; its handle holds the outcome. A flow parent's ``children``
    are handed to it (into its receiving parameter when ``gather`` says how)."""
    # The names a real enqueue would refuse are refused here too (a test must not pass eagerly
    # with a lane the engine refuses); the dedup key is checked, not kept: nothing is stored.
    lane = DEFAULT_GROUP if call.lane is None else validate_group(call.lane)
    if call.dedup_key is not None:
        validate_dedup(call.dedup_key)
    # The same round trip a worker's job makes: encoded with the codec and decoded.
    try:
        payload = app.codec.decode(app.codec.encode(call.payload))
    except InvalidArgument as exc:
        raise as_args(exc, call) from None
    task = call.task
    job_id = call.id or LOCAL_IDS.mint("JOB")
    job = Job(job_id, payload, 1, lane, 0, task.queue)
    arguments = payload["args"]
    if children is not None and gather is not None and call.receive is not None:
        arguments = received(arguments, [call.receive, gather], children)
    args, kwargs = task.signature.load(arguments)
    trail = Trail()
    try:
        result = await execute(app, task, job, args, kwargs, app.state, trail, children)
        kept = None if result is None else app.codec.decode(app.codec.encode(result))
    except Exception as exc:
        if propagate:
            raise
        info = JobInfo(
            job_id,
            "dead",
            1,
            payload,
            job.lane,
            progress=trail.progress,
            last_error=error_text(exc),
            finished=time.time(),
            traceback="".join(traceback.format_exception(exc)),
        )
    else:
        info = JobInfo(
            job_id,
            "completed",
            1,
            payload,
            job.lane,
            progress=trail.progress,
            result=kept,
            finished=time.time(),
        )
    return Handle(task, Verdict("enqueued", job_id), None, info, trail.lines)


def blocking(work: Coroutine[Any, Any, R]) -> R:
    """Run ``work`` to its end from blocking code, even when this thread runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    box: list[R] = []
    failure: list[BaseException] = []

    def work_in_thread() -> None:
        try:
            box.append(asyncio.run(work))
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=work_in_thread, name="echomq-eager")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return box[0]

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

from echomq.engine.keys import DEFAULT_GROUP
from echomq.engine.results import Job, JobInfo, Verdict
from echomq.tasks.context import Trail
from echomq.tasks.handle import Handle
from echomq.tasks.runtime import error_text, execute

if TYPE_CHECKING:
    from echomq.tasks.app import App
    from echomq.tasks.task import Call

R = TypeVar("R")


async def run(app: App, call: Call[R]) -> Handle[R]:
    """Run ``call`` here and now; its handle holds the outcome."""
    # The same round trip a worker's job makes: encoded with the codec and decoded.
    payload = app.codec.decode(app.codec.encode(call.payload))
    task = call.task
    job_id = call.id or app._eager_ids.mint("JOB")
    job = Job(job_id, payload, 1, call.lane or DEFAULT_GROUP, 0, task.queue)
    args, kwargs = task.signature.load(payload["args"])
    trail = Trail()
    try:
        result = await execute(app, task, job, args, kwargs, app.state, trail)
        kept = None if result is None else app.codec.decode(app.codec.encode(result))
    except Exception as exc:
        if app.eager_propagate:
            raise
        info = JobInfo(
            job_id,
            "dead",
            1,
            payload,
            job.group,
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
            job.group,
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

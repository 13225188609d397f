"""The task layer's producer: a bound call (``task.call(...)``) admitted to its queue, one at a
time, in batches, as a flow, or from blocking code. :class:`App` holds one and swaps in the eager
producer (``echomq.tasks.eager``) for eager mode: the enqueue paths never ask which mode runs.

Each path applies the task's lane settings the first time this process meets a lane
(``lane_limit``, ``lane_rate``), then hands the call's :class:`JobOptions` to the queue's one
admission method (``Queue.admit``, ``admit_many``, ``SyncQueue.admit``).
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from echomq.engine.keys import DEFAULT_GROUP
from echomq.engine.options import JobOptions
from echomq.engine.queue import Queue
from echomq.errors import InvalidArgument
from echomq.tasks.handle import Handle, SyncHandle
from echomq.tasks.task import Call, Task, as_args

if TYPE_CHECKING:
    from echomq.tasks.app import App
    from echomq.tasks.canvas import FlowHandle, TaskFlow

R = TypeVar("R")


#: Lanes whose per-lane settings this process already applied (least recently used dropped).
LANES_REMEMBERED = 10_000


class SeenLanes:
    """The lanes this process configured already (settings are idempotent engine writes: a
    race that applies them twice is harmless); bounded, and safe to share between threads."""

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self._lock = threading.Lock()

    def is_new(self, key: tuple[Any, ...]) -> bool:
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return False
            return True

    def add(self, key: tuple[Any, ...]) -> None:
        with self._lock:
            self._seen[key] = None
            while len(self._seen) > LANES_REMEMBERED:
                self._seen.popitem(last=False)


class Producer:
    """Admits an app's calls to a server (the live producer)."""

    def __init__(self, app: App) -> None:
        self.app = app
        #: The lanes whose task settings (``lane_limit``, ``lane_rate``) this process applied.
        self.seen = SeenLanes()

    async def enqueue_call(self, call: Call[R]) -> Handle[R]:
        app = self.app
        task = call.task
        queue = app.opened_queue(task.queue) or await app.open_queue(task.queue)
        if task.lane_limit is not None or task.lane_rate is not None:
            await self.configure_lane(queue, call)
        try:
            verdict = await queue.admit(call.payload, call.options, carries_context=True)
        except InvalidArgument as exc:
            raise as_args(exc, call) from None
        return Handle(task, verdict, queue)

    async def enqueue_many(self, calls: list[Call[Any]]) -> list[Handle[Any]]:
        """``calls`` checked already (:func:`checked_calls`): one pipelined batch per queue."""
        names = {call.task.queue for call in calls}
        queues = {name: await self.app.open_queue(name) for name in names}
        configured: dict[tuple[Any, ...], Call[Any]] = {}
        for call in calls:
            task = call.task
            if task.lane_limit is not None or task.lane_rate is not None:
                configured[(task.queue, call.lane, task.name)] = call
        if configured:
            await asyncio.gather(
                *(
                    self.configure_lane(queues[c.task.queue], c, batch=True)
                    for c in configured.values()
                )
            )
        if len(queues) == 1:
            # The commonest batch: one queue, so no regrouping, and the handles in input order.
            [only] = queues.values()
            answers = await only.admit_many(
                [({"task": c[0].name, "args": c[1]}, c[2]) for c in calls],  # Call.payload
                carries_context=True,
            )
            return [Handle(c[0], v, only) for c, v in zip(calls, answers, strict=True)]
        # One batch per queue, in input order within it.
        Pairs = list[tuple[Any, JobOptions]]
        jobs: dict[str, tuple[Pairs, list[int]]] = {name: ([], []) for name in names}
        seen: Task[Any, Any] | None = None
        for index, call in enumerate(calls):
            task = call.task
            if task is not seen:  # a batch is mostly one task's calls: look its queue up once
                seen = task
                pairs, indexes = jobs[task.queue]
                name = task.name
            indexes.append(index)
            pairs.append(({"task": name, "args": call.args}, call.options))  # Call.payload
        sent = await asyncio.gather(
            *(queues[n].admit_many(p, carries_context=True) for n, (p, _) in jobs.items())
        )
        handles: list[Handle[Any]] = [None] * len(calls)  # type: ignore[list-item]
        for (name, (_, indexes)), verdicts in zip(jobs.items(), sent, strict=True):
            queue = queues[name]
            for index, verdict in zip(indexes, verdicts, strict=True):
                handles[index] = Handle(calls[index].task, verdict, queue)
        return handles

    async def enqueue_flow(self, flow: TaskFlow[R]) -> FlowHandle[R]:
        from echomq.tasks.canvas import enqueue

        return await enqueue(self.app, flow)

    def enqueue_call_sync(self, call: Call[R]) -> SyncHandle[R]:
        app = self.app
        queue = app.sync_queue(call.task.queue)
        app.apply_lanes_sync(queue)
        task = call.task
        key = self.lane_due(queue.name, call)
        if key is not None:
            queue.configure_lane(key[1], limit=task.lane_limit, rate=task.lane_rate)
            self.seen.add(key)
        try:
            verdict = queue.admit(call.payload, call.options, carries_context=True)
        except InvalidArgument as exc:
            raise as_args(exc, call) from None
        return SyncHandle(task, verdict, queue)

    # -- a task's lane settings ----------------------------------------------------------------

    def lane_due(self, queue: str, call: Call[Any]) -> tuple[Any, ...] | None:
        """The lane key whose settings this process has yet to apply for ``call``, else None."""
        task = call.task
        if task.lane_limit is None and task.lane_rate is None:
            return None
        lane = DEFAULT_GROUP if call.lane is None else call.lane
        key = (queue, lane, task.lane_limit, task.lane_rate)
        return key if self.seen.is_new(key) else None

    async def configure_lane(self, queue: Queue, call: Call[Any], *, batch: bool = False) -> None:
        """Apply ``call``'s task lane settings to its lane, the first time this process sees it
        (``batch``: a bad lane name is left to the item's own verdict)."""
        task = call.task
        key = self.lane_due(queue.name, call)
        if key is None:
            return
        try:
            lane = queue.lane(key[1])
        except InvalidArgument:
            if batch:
                return  # the item's own verdict says what is wrong with its lane
            raise
        if task.lane_limit is not None:
            await lane.limit(task.lane_limit)
        if task.lane_rate is not None:
            await lane.rate(*task.lane_rate)
        self.seen.add(key)


def checked_calls(calls: Iterable[Call[Any]]) -> list[Call[Any]]:
    """``enqueue_many``'s calls as a list, each one a ``task.call(...)`` (refused by name, before
    the first write)."""
    if isinstance(calls, str | bytes | Call) or not isinstance(calls, Iterable):
        raise InvalidArgument("calls", calls, "expected an iterable of task.call(...) values")
    calls = list(calls)
    for call in calls:
        if not isinstance(call, Call):
            raise InvalidArgument("calls", call, "expected task.call(...) values")
    return calls

"""The notification worker's test rig: a real notify queue with the stage's ``notify`` task on
an app of its own, the notifier, worker and consumer on the sandbox, plus the checks the flood
and fault tests share (budgets from sandbox timestamps)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from aiogram import Bot

from codemojex.notify.api import Notifier
from codemojex.notify.consumer import NOTIFY_CONSUMER, NotificationConsumer
from codemojex.notify.policy import BadTokenError, NotifyOptions
from codemojex.notify.tasks import NotifyTask, register
from codemojex.notify.worker import NotifyWorker
from echomq import App, Queue
from echomq.consumers import Tally
from echomq.engine import Minter

#: The consumer options the application ships with: the tests measure what runs.
TEST_CONSUMER = NOTIFY_CONSUMER


@dataclass
class Rig:
    queue: Queue
    notifier: Notifier
    worker: NotifyWorker
    consumer: NotificationConsumer
    task: NotifyTask


def rig(
    queue: Queue,
    bot: Bot,
    *,
    options: NotifyOptions | None = None,
    check_token: bool = True,
    worker: type[NotifyWorker] = NotifyWorker,
) -> Rig:
    minter = Minter(node=9)
    app = App(queue=queue.name, wire=queue.wire, minter=minter, result_ttl=0)
    task = register(app, queue.name)
    handler = worker(bot, queue, options)
    consumer = NotificationConsumer(app, handler, TEST_CONSUMER, check_token=check_token)
    return Rig(queue, Notifier(task, minter), handler, consumer, task)


@contextlib.asynccontextmanager
async def running(
    consumer: NotificationConsumer,
) -> AsyncIterator[asyncio.Future[dict[str, Tally]]]:
    """The consumer runs for the block; on exit it stops (a bad token's error is the test's to
    read from the yielded future, so it is not raised here)."""
    task = asyncio.ensure_future(consumer.run())
    try:
        yield task
    finally:
        consumer.stop()
        with contextlib.suppress(BadTokenError):
            await task
        await consumer.app.close()  # the app's queue: its cancel subscription (the wire stays)


async def until(predicate: Callable[[], bool | Awaitable[bool]], timeout: float, what: str) -> None:
    """Poll a condition with no event behind it (counters of another component) to a deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        held = predicate()
        if not isinstance(held, bool):
            held = await held
        if held:
            return
        assert loop.time() < deadline, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.05)


def worst_excess(times: Sequence[float], rate: float, burst: int) -> float:
    """How far ``times`` (sorted) went over a budget of ``burst`` + ``rate``·t in any window of
    length t: the most any window held beyond it (≤ 0 means always within).

    A token bucket replayed over the sends: its level after send j is the minimum over i ≤ j of
    burst + rate·(t_j − t_i) − (j − i + 1), exactly the tightest window ending at j.
    """
    level, last, worst = float(burst), None, float("-inf")
    for at in times:
        if last is not None:
            level = min(float(burst), level + rate * (at - last))
        last = at
        level -= 1.0
        worst = max(worst, -level)
    return worst

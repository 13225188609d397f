"""Testing code that uses echomq, as docs/guides/tasks.md shows it: eager mode for unit tests (no
server), and the pytest plugin's embedded Valkey with a real worker for integration tests.

Run: ``pytest examples/test_emailapp.py`` (the ``echomq`` pytest plugin comes with echomq; its
embedded server needs the ``echomq[server]`` extra).
"""

from __future__ import annotations

import pytest

from echomq import App, AppWorker, InvalidArgument, TaskFailed
from echomq.testing import discard
from emailapp.tasks import OUTBOX, app, send_email, welcome


async def test_send_email_runs_inline_in_eager_mode() -> None:
    with app.eager_mode():  # no server: the task runs inside enqueue, through the JSON codec
        handle = await send_email.enqueue("acme", "a@acme.test", "Hi")
    assert handle.verdict.kind == "enqueued"
    assert await handle.result() == {"accepted": "a@acme.test", "attempt": "1"}
    assert OUTBOX[-1] == {"tenant": "acme", "to": "a@acme.test", "subject": "Hi"}


async def test_welcome_enqueues_an_email_in_eager_mode() -> None:
    with app.eager_mode():
        handle = await welcome.enqueue("acme", "ada@acme.test")
        assert await handle.result() == "welcomed ada@acme.test"
    assert OUTBOX[-1]["subject"] == "Welcome!"


def test_a_wrong_call_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(InvalidArgument, match="subject"):
        send_email.call("acme", "a@acme.test")  # type: ignore[call-arg]


async def test_a_failing_task_raises_task_failed_from_its_result() -> None:
    offline = App("valkey://127.0.0.1:1")  # eager mode never connects

    @offline.task()
    async def divide(a: int, b: int) -> float:
        return a / b

    with offline.eager_mode():
        handle = await divide.enqueue(1, 0)
    with pytest.raises(TaskFailed, match="ZeroDivisionError"):
        await handle.result()


async def test_a_real_worker_serves_a_tenants_lane(echomq_url: str, echomq_queue_name: str) -> None:
    shouting = App(echomq_url, queue=echomq_queue_name)

    @shouting.task(lane="tenant")
    async def shout(tenant: str, text: str) -> str:
        return text.upper()

    async with shouting:
        handle = await shout.enqueue("acme", "hello")
        await AppWorker(shouting).run_until_idle()  # drains the queue, then returns
        assert await handle.result(timeout=5) == "HELLO"
        await discard(shouting.queue())

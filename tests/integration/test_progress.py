"""Progress and logs against a real Valkey: fenced by the claim's token, bounded and checked
before any write, published as events, and alive exactly as long as the job's row."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from echomq import App, AppWorker, ConsumerOptions, Fixed, InvalidArgument, context
from echomq.engine.queue import Queue
from echomq.errors import ArgumentRefused, StaleTokenError
from echomq.testing import claim_job, discard


@pytest.fixture
async def kept(valkey_url: str, queue_name: str) -> AsyncIterator[Queue]:
    """A queue that keeps completed rows (and so their logs) for a minute."""
    q = await Queue.connect(valkey_url, queue_name, result_ttl=60)
    yield q
    await discard(q)


async def test_progress_and_log_lines_reach_a_subscriber_and_the_row(queue: Queue) -> None:
    await queue.enqueue("work")
    job = await claim_job(queue)
    async with queue.subscribe() as events:
        assert await queue.progress(job, value={"done": 1, "of": 3}, log=["one", "two"])
        heard = [await asyncio.wait_for(events.get(), 5) for _ in range(3)]
    assert heard == [
        {"event": "progress", "job": job.id, "progress": {"done": 1, "of": 3}},
        {"event": "log", "job": job.id, "line": "one"},
        {"event": "log", "job": job.id, "line": "two"},
    ]
    info = await queue.job(job.id)
    assert info is not None
    assert info.progress == {"done": 1, "of": 3}
    assert await queue.logs(job.id) == ["one", "two"]
    assert await queue.progress(job, value=0.5)  # the value alone; the log stays
    info = await queue.job(job.id)
    assert info is not None
    assert info.progress == 0.5
    assert await queue.logs(job.id, limit=1) == ["two"]


async def test_the_log_is_trimmed_to_its_newest_lines(queue: Queue) -> None:
    await queue.enqueue("work")
    job = await claim_job(queue)
    for start in range(0, 120, 40):
        assert await queue.progress(job, log=[f"line {n}" for n in range(start, start + 40)])
    assert await queue.logs(job.id, limit=1000) == [f"line {n}" for n in range(20, 120)]
    assert await queue.progress(job, log=["last"], keep=3)
    assert await queue.logs(job.id) == ["line 118", "line 119", "last"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"value": "x" * 1100}, "value"),
        ({"value": float("nan")}, "value"),
        ({"value": 1, "log": ["ok", "é" * 600]}, "log"),
        ({"value": 1, "log": ["x"] * 1001}, "log"),
        ({"value": 1, "log": [3]}, "log"),
        ({"value": 1, "keep": 0}, "keep"),
        ({}, "value"),
    ],
)
async def test_an_oversized_report_is_refused_naming_its_argument_and_writes_nothing(
    queue: Queue, options: dict[str, object], named: str
) -> None:
    await queue.enqueue("work")
    job = await claim_job(queue)
    with pytest.raises(InvalidArgument) as refused:
        await queue.progress(job, **options)  # type: ignore[arg-type]
    assert refused.value.argument == named
    info = await queue.job(job.id)
    assert info is not None
    assert info.progress is None
    assert await queue.logs(job.id) == []


async def test_the_script_refuses_an_oversized_line_before_any_write(queue: Queue) -> None:
    await queue.enqueue("work")
    job = await claim_job(queue)
    with pytest.raises(ArgumentRefused, match="log line"):
        await queue.engine.progress(job.id, job.attempts, "7", ["ok", "x" * 1025], 100)
    info = await queue.job(job.id)
    assert info is not None
    assert info.progress is None
    assert await queue.logs(job.id) == []


async def test_a_stale_token_is_refused_and_a_gone_job_answers_false(queue: Queue) -> None:
    await queue.enqueue("work")
    first = await claim_job(queue, lease=0.05)
    await asyncio.sleep(0.1)
    await queue.reap()
    second = await claim_job(queue)
    with pytest.raises(StaleTokenError):
        await queue.progress(first, value=1, log=["late"])
    assert await queue.logs(first.id) == []
    assert await queue.progress(second, value=2)
    assert await queue.complete(second)  # result_ttl 0: the row is deleted
    assert await queue.progress(second, value=3) is False


async def test_a_reaped_holder_may_still_report_and_then_complete(kept: Queue) -> None:
    await kept.enqueue("work")
    job = await claim_job(kept, lease=0.05)
    await asyncio.sleep(0.1)
    await kept.reap()
    assert await kept.progress(job, log=["still here"])
    assert await kept.complete(job, result="ok")  # the report took nothing from the holder
    assert await kept.logs(job.id) == ["still here"]


async def test_the_log_is_deleted_with_its_row(queue: Queue) -> None:
    await queue.enqueue_many(["completed", "removed", "drained"])
    done = await claim_job(queue)
    assert await queue.progress(done, log=["a"])
    assert await queue.complete(done)  # result_ttl 0
    assert await queue.wire.call("EXISTS", queue.keys.log(done.id)) == 0
    removed = await claim_job(queue)
    assert await queue.progress(removed, log=["b"])
    assert await queue.retry(removed, delay=60, error="later") == "scheduled"
    assert await queue.remove(removed.id)
    assert await queue.wire.call("EXISTS", queue.keys.log(removed.id)) == 0
    drained = await claim_job(queue)
    assert await queue.progress(drained, log=["c"])
    assert await queue.retry(drained, delay=60, error="later") == "scheduled"
    assert await queue.drain(schedule=True) == 1
    assert await queue.wire.call("EXISTS", queue.keys.log(drained.id)) == 0


async def test_obliterate_deletes_every_log(valkey_url: str, queue_name: str) -> None:
    queue = await Queue.connect(valkey_url, queue_name + "-o", result_ttl=60)
    await queue.enqueue_many(["leased", "kept"])
    leased, kept = await claim_job(queue), await claim_job(queue)
    for job in (leased, kept):
        assert await queue.progress(job, log=["x"])
    assert await queue.complete(kept)
    await discard(queue)  # pause + obliterate(force=True)
    async with await Queue.connect(valkey_url, queue_name + "-o") as again:
        for job in (leased, kept):
            assert await again.wire.call("EXISTS", again.keys.log(job.id)) == 0


async def test_a_kept_row_gives_its_log_the_same_expiry(kept: Queue) -> None:
    await kept.enqueue("work")
    job = await claim_job(kept)
    assert await kept.progress(job, value=1, log=["x"])
    assert await kept.wire.call("PTTL", kept.keys.log(job.id)) == -1  # lives with the held row
    assert await kept.complete(job, result="ok")
    row_ttl = await kept.wire.call("PTTL", kept.keys.job(job.id))
    log_ttl = await kept.wire.call("PTTL", kept.keys.log(job.id))
    assert 0 < row_ttl <= 60_000
    assert abs(row_ttl - log_ttl) < 50


async def test_a_task_reports_through_its_context_and_the_handle_reads_it(
    valkey_url: str, queue_name: str
) -> None:
    app = App(valkey_url, queue=queue_name)
    await app.connect()

    @app.task
    async def crunch(n: int) -> int:
        for i in range(n):
            await context().log(f"step {i}")
        await context().progress({"done": n, "of": n})
        return n

    try:
        handle = await crunch.enqueue(3)
        await AppWorker(app, options=ConsumerOptions(beat=0.1, backoff=Fixed(0))).run_until_idle()
        assert await handle.result(timeout=5) == 3
        assert await handle.progress() == {"done": 3, "of": 3}
        assert await handle.logs() == ["step 0", "step 1", "step 2"]
        assert app.sync_queue().logs(handle.id, limit=2) == ["step 1", "step 2"]
        blocking = crunch.handle_sync(handle.id)
        assert blocking.progress() == {"done": 3, "of": 3}
        assert blocking.logs(limit=1) == ["step 2"]
        with app.eager_mode():
            eager = await crunch.enqueue(2)
        assert await eager.progress() == {"done": 2, "of": 2}
        assert await eager.logs() == ["step 0", "step 1"]
    finally:
        queue = app.queue()
        await queue.pause()
        await queue.obliterate(force=True)
        await app.close()

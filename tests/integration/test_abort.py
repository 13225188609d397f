"""Abort: cancelling a pending, a scheduled and a running job (in an ``echomq worker`` process,
stopped within one beat through the engine, never retried), the answers for finished and
unknown jobs, a marked job's failure, deferral and expired lease, the race a handler wins, and
a shielded block that defers the cancel to its end."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from echomq import (
    App,
    AppWorker,
    ConsumerOptions,
    InvalidArgument,
    Queue,
    SyncQueue,
    TaskCancelled,
    shielded,
)
from echomq.engine import Reaped, Subscription
from echomq.testing import claim_job

# The cancel channel's subscriber on asyncio's event loop and on uvloop's (tests/conftest.py).
pytestmark = pytest.mark.every_loop

HERE = Path(__file__).resolve().parent
BEAT = 1.0
LEASE = 1.0


@pytest.fixture
async def kept(valkey_url: str, queue_name: str) -> Any:
    """A queue that keeps finished rows (results and cancelled jobs) for a minute."""
    queue = await Queue.connect(valkey_url, queue_name, result_ttl=60)
    yield queue
    await queue.pause()
    await queue.obliterate(force=True)
    await queue.close()


async def _event(events: Subscription, kind: str, job_id: str) -> dict[str, Any]:
    while True:
        event = await events.get()
        if event.get("event") == kind and event.get("job") == job_id:
            return event


async def _events(events: Subscription, kinds: set[str], job_id: str) -> dict[str, Any]:
    """The first event of each kind for ``job_id``, in whatever order they come."""
    seen: dict[str, Any] = {}
    while set(seen) != kinds:
        event = await events.get()
        if event.get("event") in kinds and event.get("job") == job_id:
            seen.setdefault(event["event"], event)
    return seen


# -- pending, scheduled, finished and unknown jobs ----------------------------------------------


async def test_cancel_takes_a_pending_job_out_of_its_lane(kept: Queue) -> None:
    verdict = await kept.enqueue({"n": 1}, lane="acme")
    waiting = asyncio.ensure_future(kept.wait(verdict.id, 10))
    answer = await kept.cancel(verdict.id, "not needed")
    assert (answer.was, answer.outcome) == ("pending", "cancelled")
    info = await asyncio.wait_for(waiting, 10)  # the done channel woke the wait
    assert info is not None
    assert (info.state, info.cancel, info.attempts) == ("cancelled", "not needed", 0)
    assert info.finished is not None
    counts = await kept.counts()
    assert (counts.pending, counts.cancelled, counts.lanes, counts.ringed) == (0, 1, 0, 0)
    assert not await kept.claim()  # nothing left to run


async def test_cancel_takes_a_scheduled_job_off_the_schedule(kept: Queue) -> None:
    verdict = await kept.enqueue_in(0.05, {"n": 1})
    answer = await kept.cancel(verdict.id)
    assert (answer.was, answer.outcome) == ("scheduled", "cancelled")
    await asyncio.sleep(0.1)  # past its run-at (server clock): promote would have moved it
    assert await kept.promote() == 0
    assert await kept.state(verdict.id) == "cancelled"
    assert (await kept.counts()).scheduled == 0


async def test_cancel_answers_for_finished_and_unknown_jobs_and_changes_nothing(
    kept: Queue,
) -> None:
    done = await kept.enqueue("a")
    await kept.complete(await claim_job(kept), result=7)
    dead = await kept.enqueue("b")
    assert await kept.retry(await claim_job(kept), max_attempts=1, error="boom") == "dead"
    gone = await kept.enqueue("c")
    await kept.cancel(gone.id, "first")
    answers = [await kept.cancel(i, "again") for i in (done.id, dead.id, gone.id)]
    assert [(a.was, a.outcome) for a in answers] == [
        ("completed", "finished"),
        ("dead", "finished"),
        ("cancelled", "finished"),
    ]
    unknown = await kept.cancel("JOB0000000000a")  # well formed, never admitted
    assert (unknown.was, unknown.outcome) == ("absent", "absent")
    assert (await kept.job(done.id)).result == 7  # type: ignore[union-attr]
    assert (await kept.job(gone.id)).cancel == "first"  # type: ignore[union-attr]


async def test_a_queue_that_keeps_no_results_deletes_a_cancelled_row(queue: Queue) -> None:
    verdict = await queue.enqueue("x", dedup_key="once")
    assert (await queue.cancel(verdict.id)).outcome == "cancelled"
    assert await queue.job(verdict.id) is None
    assert await queue.wait(verdict.id, 1) is None
    assert (await queue.enqueue("x", dedup_key="once")).kind == "enqueued"  # its key went too


async def test_cancel_checks_its_arguments_before_any_write(kept: Queue) -> None:
    verdict = await kept.enqueue("x")
    with pytest.raises(InvalidArgument, match="reason"):
        await kept.cancel(verdict.id, "x" * 257)
    with pytest.raises(InvalidArgument, match="reason"):
        await kept.cancel(verdict.id, 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="job id"):
        await kept.cancel("not-an-id")
    assert await kept.state(verdict.id) == "pending"
    assert (await kept.cancel(verdict.id, "é" * 128)).outcome == "cancelled"  # 256 bytes


def test_a_sync_queue_cancels_a_pending_job(valkey_url: str, queue_name: str) -> None:
    queue = SyncQueue.connect(valkey_url, queue_name, result_ttl=60)
    try:
        verdict = queue.enqueue("x")
        assert queue.cancel(verdict.id, "sync").outcome == "cancelled"
        info = queue.wait(verdict.id, 5)
        assert info is not None
        assert (info.state, info.cancel) == ("cancelled", "sync")
        assert queue.cancel(verdict.id).outcome == "finished"
    finally:
        queue.close()


# -- a leased job: marked, then ended by its holder, its failure, its deferral or the reaper ---


async def test_a_marked_job_that_fails_or_defers_is_not_retried(kept: Queue) -> None:
    for n in range(2):
        await kept.enqueue(n)
    failing, deferring = await claim_job(kept), await claim_job(kept)
    for job in (failing, deferring):
        assert (await kept.cancel(job.id, "stop")).outcome == "requested"
        assert await kept.state(job.id) == "active"  # its holder ends it
    assert await kept.retry(failing, delay=0, error="boom") == "cancelled"
    assert await kept.delay(deferring, delay=5)
    for job in (failing, deferring):
        info = await kept.job(job.id)
        assert info is not None
        assert (info.state, info.cancel, info.attempts) == ("cancelled", "stop", 1)
    counts = await kept.counts()
    assert (counts.pending, counts.scheduled, counts.active, counts.cancelled) == (0, 0, 0, 2)


async def test_the_reaper_ends_a_marked_job_whose_holder_is_gone_and_refuses_its_settle(
    kept: Queue,
) -> None:
    await kept.enqueue("x")
    job = await kept.claim(lease=0.05)
    assert job
    assert (await kept.cancel(job.id, "stop")).outcome == "requested"
    await asyncio.sleep(0.1)  # the lease expires on the server clock
    assert await kept.reap(max_stalled=3) == Reaped([], [])  # not back in its lane
    info = await kept.job(job.id)
    assert info is not None
    assert (info.state, info.cancel, info.stalled) == ("cancelled", "stop", 0)
    assert await kept.complete_each([job]) == ["settled"]  # the holder comes back too late
    assert not await kept.claim()


async def test_a_handler_that_finishes_before_the_cancel_reaches_it_completes(
    kept: Queue,
) -> None:
    await kept.enqueue("x")
    job = await claim_job(kept)
    assert (await kept.cancel(job.id, "late")).outcome == "requested"
    assert await kept.complete(job, result="done")  # the race: the work did finish
    info = await kept.job(job.id)
    assert info is not None
    assert (info.state, info.result) == ("completed", "done")


# -- a running job in a worker process ----------------------------------------------------------


async def test_a_running_job_in_a_worker_process_is_cancelled_within_a_beat_and_never_retried(
    valkey_url: str, queue_name: str
) -> None:
    app = App(valkey_url, queue=queue_name)

    @app.task("hang")
    async def hang() -> None: ...  # the worker's abort_app.hang: only its name travels

    env = {**os.environ, "ECHOMQ_TEST_QUEUE": queue_name}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    argv = ["--url", valkey_url, "worker", "abort_app:app", "--beat", str(BEAT)]
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "echomq", *argv, "--lease", str(LEASE),
        env=env, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    try:
        async with app:
            queue = app.queue()
            async with queue.subscribe() as events:
                handle = await hang.enqueue()
                await asyncio.wait_for(_event(events, "progress", handle.id), 30)  # it runs
                asked = loop.time()
                answer = await handle.cancel("operator said stop")
                info = await queue.wait(handle.id, BEAT)
                took = loop.time() - asked
                told = await asyncio.wait_for(
                    _events(events, {"cancelling", "cancelled"}, handle.id), 10
                )
            assert told["cancelling"]["reason"] == "operator said stop"  # asked, from here
            assert told["cancelled"]["job"] == handle.id  # ended, by the worker
            assert answer.outcome == "requested"
            assert info is not None, "not cancelled within one beat"
            assert took < BEAT
            assert (info.state, info.cancel, info.attempts) == (
                "cancelled",
                "operator said stop",
                1,
            )
            assert await queue.logs(handle.id) == ["stopped"]  # the handler was cancelled
            with pytest.raises(TaskCancelled) as raised:
                await handle.result(timeout=1)
            assert (raised.value.id, raised.value.reason) == (handle.id, "operator said stop")
            await asyncio.sleep(LEASE)  # past the lease it held (server clock)
            assert await queue.reap() == Reaped([], [])
            info = await queue.job(handle.id)
            assert info is not None
            assert (info.state, info.attempts) == ("cancelled", 1)  # never claimed again
            counts = await queue.counts()
            assert (counts.pending, counts.active, counts.scheduled) == (0, 0, 0)
            await queue.pause()
            await queue.obliterate(force=True)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(worker.communicate(), 30)
    assert worker.returncode == 0, err.decode()
    assert f"job {handle.id} cancelled at attempt 1" in err.decode()


# -- a shielded block -----------------------------------------------------------------------------


async def test_a_shielded_block_defers_the_cancel_to_its_end(
    valkey_url: str, queue_name: str
) -> None:
    app = App(valkey_url, queue=queue_name)
    inside, release = asyncio.Event(), asyncio.Event()
    steps: list[str] = []

    @app.task
    async def critical() -> None:
        async with shielded():
            inside.set()
            await release.wait()  # a cancel arrives here and waits
            steps.append("block ended")
        steps.append("after the block")  # never: the cancel takes effect at the block's end

    async with app:
        queue = app.queue()
        handle = await critical.enqueue()
        options = ConsumerOptions(beat=0.2, stop_timeout=5)
        worker = AppWorker(app, options=options)
        running = asyncio.ensure_future(worker.run())
        try:
            await asyncio.wait_for(inside.wait(), 10)
            assert (await handle.cancel("now")).outcome == "requested"
            assert await queue.wait(handle.id, 0.5) is None  # the shield holds it: still active
            assert await queue.state(handle.id) == "active"
            release.set()
            with pytest.raises(TaskCancelled, match="now"):
                await handle.result(timeout=10)
        finally:
            worker.stop()
            tallies = await running
        assert steps == ["block ended"]
        assert tallies[queue.name].cancelled == 1
        await queue.pause()
        await queue.obliterate(force=True)

"""Debounce: the calls that share a dedup key within a quiet period are one job, run once they
pause (or at the latest ``debounce_max`` after the first), with the last call's payload (or the
first's). One script decides each call, so it holds across producers and processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from echomq import App, InvalidArgument, Item, JobOptions, Queue, SyncQueue
from echomq.testing import discard

KEY = JobOptions(dedup_key="user-7", debounce=30.0)


@pytest.fixture
def sync_queue(valkey_url: str, queue_name: str) -> Iterator[SyncQueue]:
    with SyncQueue.connect(valkey_url, queue_name) as queue:
        yield queue


@pytest.fixture
async def app(valkey_url: str, queue_name: str) -> AsyncIterator[App]:
    async with App(valkey_url, queue=queue_name) as app:
        yield app
        await discard(app.queue())


async def _due(queue: Queue, job_id: str) -> float:
    """When the job is due (server ms, from the schedule)."""
    return float(await queue.wire.call("ZSCORE", queue.keys.schedule, job_id))


async def test_later_calls_move_the_waiting_job_and_replace_its_payload(queue: Queue) -> None:
    first = await queue.admit({"n": 1}, KEY)
    due = await _due(queue, first.id)
    second = await queue.admit({"n": 2}, KEY)
    third = await queue.admit({"n": 3}, KEY)
    assert (first.kind, second.kind, third.kind) == ("scheduled", "debounced", "debounced")
    assert second.id == third.id == first.id
    assert await _due(queue, first.id) >= due  # pushed back from each call's time
    info = await queue.job(first.id)
    assert info is not None
    assert info.payload == {"n": 3}
    assert info.state == "scheduled"
    counts = await queue.counts()
    assert (counts.scheduled, counts.pending) == (1, 0)


async def test_keep_first_keeps_the_first_calls_payload(queue: Queue) -> None:
    options = KEY._replace(debounce_keep="first")
    first = await queue.admit({"n": 1}, options)
    await queue.admit({"n": 2}, options)
    info = await queue.job(first.id)
    assert info is not None
    assert info.payload == {"n": 1}


async def test_debounce_max_bounds_how_far_the_first_calls_job_moves(queue: Queue) -> None:
    options = JobOptions(dedup_key="k", debounce=30.0, debounce_max=40.0)
    first = await queue.admit(0, options)
    latest = await _due(queue, first.id) + 10_000  # first call's time + 40 s, in ms
    for n in range(1, 4):
        await asyncio.sleep(0.01)
        assert (await queue.admit(n, options)).kind == "debounced"
    assert await _due(queue, first.id) <= latest


async def test_a_job_that_fell_due_is_not_moved_and_the_next_call_starts_another(
    queue: Queue,
) -> None:
    options = JobOptions(dedup_key="k", debounce=0.05)
    first = await queue.admit("a", options)
    await asyncio.sleep(0.1)
    assert await queue.promote() == 1  # due now: pending, no longer waiting in the schedule
    second = await queue.admit("b", options)
    assert (second.kind, second.id != first.id) == ("scheduled", True)
    again = await queue.admit("c", options)
    assert (again.kind, again.id) == ("debounced", second.id)
    pending = await queue.job(first.id)
    assert pending is not None
    assert (pending.state, pending.payload) == ("pending", "a")


async def test_a_plain_duplicate_of_a_debounced_key_is_a_duplicate(queue: Queue) -> None:
    first = await queue.admit("a", KEY)
    plain = await queue.enqueue("b", dedup_key=KEY.dedup_key)
    assert (plain.kind, plain.id, plain.state) == ("duplicate", first.id, "scheduled")
    info = await queue.job(first.id)
    assert info is not None
    assert info.payload == "a"


async def test_batches_debounce_item_by_item_in_input_order(queue: Queue) -> None:
    verdicts = await queue.admit_many([(n, KEY) for n in range(5)])
    assert [v.kind for v in verdicts] == ["scheduled"] + ["debounced"] * 4
    assert len({v.id for v in verdicts}) == 1
    info = await queue.job(verdicts[0].id)
    assert info is not None
    assert info.payload == 4
    assert (await queue.enqueue_many([Item(9, dedup_key="other")]))[0].kind == "enqueued"


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        (JobOptions(debounce=1.0), "dedup_key"),
        (JobOptions(dedup_key="k", debounce=0.0), "debounce"),
        (JobOptions(dedup_key="k", debounce=float("nan")), "debounce"),
        (JobOptions(dedup_key="k", debounce=2.0, debounce_max=1.0), "debounce_max"),
        (JobOptions(dedup_key="k", debounce_max=1.0), "debounce_max"),
        (JobOptions(dedup_key="k", debounce_keep="first"), "debounce_keep"),
        (JobOptions(dedup_key="k", debounce=1.0, debounce_keep="newest"), "debounce_keep"),
        (JobOptions(dedup_key="k", debounce=1.0, delay=5.0), "delay"),
        (JobOptions(dedup_key="k", debounce=1.0, at=time.time() + 5), "at"),
    ],
)
async def test_bad_debounce_options_are_refused_by_name_before_any_write(
    queue: Queue, options: JobOptions, argument: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await queue.admit("x", options)
    assert refused.value.argument == argument
    [verdict] = await queue.admit_many([("x", options)])
    assert verdict.kind == "error"
    assert verdict.error is not None
    counts = await queue.counts()
    assert (counts.pending, counts.scheduled) == (0, 0)


def test_the_blocking_producer_debounces_too(sync_queue: SyncQueue) -> None:
    first = sync_queue.admit("a", KEY)
    again = sync_queue.admit("b", KEY)
    assert (first.kind, again.kind, again.id) == ("scheduled", "debounced", first.id)
    info = sync_queue.job(first.id)
    assert info is not None
    assert info.payload == "b"


_PRODUCER = """
import sys
from echomq import JobOptions, SyncQueue
queue = SyncQueue.connect(sys.argv[1], sys.argv[2])
options = JobOptions(dedup_key="burst", debounce=60.0)
print(" ".join(queue.admit([sys.argv[3], n], options).id for n in range(200)))
queue.close()
"""


async def test_two_producer_processes_make_one_job(queue: Queue, valkey_url: str) -> None:
    def produce(name: str) -> subprocess.Popen[str]:
        command = [sys.executable, "-c", _PRODUCER, valkey_url, queue.name, name]
        return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)

    producers = [produce("a"), produce("b")]
    outputs = [p.communicate(timeout=60)[0] for p in producers]
    assert [p.returncode for p in producers] == [0, 0]
    ids = {job_id for out in outputs for job_id in out.split()}
    assert len(ids) == 1  # 400 calls from two processes: one job
    (job_id,) = ids
    info = await queue.job(job_id)
    assert info is not None
    assert info.payload[1] == 199
    counts = await queue.counts()
    assert (counts.scheduled, counts.pending) == (1, 0)


async def test_a_task_debounced_by_its_dedup_key(app: App) -> None:
    ran: list[Any] = []

    # --8<-- [start:digest]
    @app.task(dedup="user", debounce=5.0, debounce_max=60.0)
    async def digest(user: str, note: str) -> None:
        ran.append((user, note))

    first = await digest.enqueue("ada", "one")  # scheduled 5 s out
    second = await digest.enqueue("ada", "two")  # moved to 5 s from now; runs with "two"
    other = await digest.enqueue("cy", "one")  # another key: another job
    assert (first.verdict.kind, second.verdict.kind) == ("scheduled", "debounced")
    assert second.id == first.id != other.id
    # --8<-- [end:digest]
    pushed = await digest.using(debounce=30.0).enqueue("ada", "three")
    assert (pushed.verdict.kind, pushed.id) == ("debounced", first.id)
    with pytest.raises(InvalidArgument) as refused:
        app.task(name="bad", debounce=1.0, debounce_max=0.5)(digest.fn)
    assert refused.value.argument == "debounce_max"

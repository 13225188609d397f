"""Dedup windows and per-job result keeps, against a real Valkey: a dead job's dedup key is
released (at death, or after its window counted from the death), a window can count from the
job's end (``dedup_from="finish"``), and a job (a task, a call) keeps its result for its own
``result_ttl``. Key lifetimes are read as PTTL, not waited out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from echomq import App, InvalidArgument, Item, Queue, SyncQueue, chain
from echomq.testing import claim_job, discard, server_ms, wait_for_server_ms

HOUR_MS = 3_600_000


@pytest.fixture
async def kept(valkey_url: str, queue_name: str) -> AsyncIterator[Queue]:
    """A queue that keeps completed rows for a minute."""
    q = await Queue.connect(valkey_url, queue_name, result_ttl=60)
    yield q
    await discard(q)


async def _pttl(queue: Queue, key: str) -> int:
    return int(await queue.wire.call("PTTL", queue.keys.dedup(key)))


async def _bury(queue: Queue) -> str:
    job = await claim_job(queue)
    assert await queue.retry(job, max_attempts=1, error="smtp 550") == "dead"
    return job.id


# -- a dead job's key ---------------------------------------------------------------------------


async def test_a_dead_jobs_dedup_key_without_ttl_is_released_at_death(queue: Queue) -> None:
    first = await queue.enqueue("welcome", dedup_key="welcome-u1")
    assert await _pttl(queue, "welcome-u1") == -1  # held while the job lives
    await _bury(queue)
    assert await queue.state(first.id) == "dead"
    assert await _pttl(queue, "welcome-u1") == -2
    again = await queue.enqueue("welcome", dedup_key="welcome-u1")
    assert again.kind == "enqueued"
    assert again.id != first.id


async def test_a_job_dead_of_stalls_releases_its_dedup_key(queue: Queue) -> None:
    await queue.enqueue("welcome", dedup_key="welcome-u2")
    job = await claim_job(queue, lease=0.001)
    await wait_for_server_ms(queue, await server_ms(queue) + 2)
    assert (await queue.reap(max_stalled=1)).dead == [job.id]
    assert await _pttl(queue, "welcome-u2") == -2
    assert (await queue.enqueue("welcome", dedup_key="welcome-u2")).kind == "enqueued"


async def test_a_window_from_the_finish_starts_at_death_and_then_releases_the_key(
    queue: Queue,
) -> None:
    first = await queue.enqueue("w", dedup_key="welcome-u3", dedup_ttl=0.2, dedup_from="finish")
    assert await _pttl(queue, "welcome-u3") == -1  # no TTL while pending
    job = await claim_job(queue)
    assert await _pttl(queue, "welcome-u3") == -1  # nor while leased
    died = await server_ms(queue)
    await queue.retry(job, max_attempts=1, error="smtp 550")
    assert 0 < await _pttl(queue, "welcome-u3") <= 200
    assert (await queue.enqueue("w", dedup_key="welcome-u3")).id == first.id  # in the window
    await wait_for_server_ms(queue, died + 250)
    again = await queue.enqueue("w", dedup_key="welcome-u3")
    assert again.kind == "enqueued"
    assert again.id != first.id


async def test_reprocess_takes_a_released_key_back_for_the_revived_job(queue: Queue) -> None:
    first = await queue.enqueue("w", dedup_key="plain")
    await _bury(queue)
    assert await _pttl(queue, "plain") == -2
    assert await queue.reprocess(first.id)
    assert await queue.wire.call("GET", queue.keys.dedup("plain")) == first.id.encode()
    assert await _pttl(queue, "plain") == -1
    assert (await queue.enqueue("w", dedup_key="plain")).id == first.id


async def test_reprocess_puts_a_window_from_the_finish_off_until_the_next_end(
    queue: Queue,
) -> None:
    first = await queue.enqueue("w", dedup_key="fin", dedup_ttl=3600, dedup_from="finish")
    await _bury(queue)
    assert 0 < await _pttl(queue, "fin") <= HOUR_MS
    assert await queue.reprocess(first.id)
    assert await _pttl(queue, "fin") == -1
    job = await claim_job(queue)
    assert await queue.complete(job)
    assert HOUR_MS - 5000 < await _pttl(queue, "fin") <= HOUR_MS


async def test_reprocess_leaves_a_key_another_job_holds_now(queue: Queue) -> None:
    first = await queue.enqueue("w", dedup_key="taken")
    await _bury(queue)
    second = await queue.enqueue("w", dedup_key="taken")
    assert second.id != first.id
    assert await queue.reprocess(first.id)
    assert await queue.wire.call("GET", queue.keys.dedup("taken")) == second.id.encode()


async def test_a_ttl_from_enqueue_runs_on_through_death(queue: Queue) -> None:
    first = await queue.enqueue("w", dedup_key="own", dedup_ttl=600)
    await _bury(queue)
    assert 590_000 < await _pttl(queue, "own") <= 600_000
    assert (await queue.enqueue("w", dedup_key="own")).id == first.id


# -- a window counted from the finish -----------------------------------------------------------


async def test_a_window_from_the_finish_gets_its_ttl_at_completion(queue: Queue) -> None:
    first = await queue.enqueue("w", dedup_key="sent-u1", dedup_ttl=3600, dedup_from="finish")
    assert await _pttl(queue, "sent-u1") == -1
    job = await claim_job(queue)
    await queue.retry(job, delay=0.001, max_attempts=5)  # scheduled: still no TTL
    assert await queue.state(first.id) == "scheduled"
    assert await _pttl(queue, "sent-u1") == -1
    await wait_for_server_ms(queue, await server_ms(queue) + 2)
    await queue.promote()
    job = await claim_job(queue)
    assert await queue.complete(job)  # the queue keeps no rows: the key outlives its row
    assert HOUR_MS - 5000 < await _pttl(queue, "sent-u1") <= HOUR_MS
    assert (await queue.enqueue("w", dedup_key="sent-u1")).id == first.id
    assert await queue.wire.call("ZSCORE", queue.keys.dedups, "sent-u1") is not None
    await queue.pause()
    await queue.obliterate(force=True)  # a key that outlived its row goes with the queue
    assert await _pttl(queue, "sent-u1") == -2


async def test_a_window_from_the_finish_outlasts_a_shorter_kept_result(kept: Queue) -> None:
    await kept.enqueue("w", dedup_key="sent-u2", dedup_ttl=3600, dedup_from="finish")
    assert await kept.complete(await claim_job(kept))
    assert HOUR_MS - 5000 < await _pttl(kept, "sent-u2") <= HOUR_MS


async def test_a_window_from_the_finish_starts_when_the_job_is_removed_or_cancelled(
    kept: Queue,
) -> None:
    removed = await kept.enqueue("w", dedup_key="rm", dedup_ttl=600, dedup_from="finish")
    cancelled = await kept.enqueue("w", dedup_key="cx", dedup_ttl=600, dedup_from="finish")
    assert await kept.remove(removed.id)
    await kept.cancel(cancelled.id)
    for key in ("rm", "cx"):
        assert 590_000 < await _pttl(kept, key) <= 600_000
    # A second end (the kept cancelled row removed) does not restart the window.
    await wait_for_server_ms(kept, await server_ms(kept) + 20)
    assert await kept.remove(cancelled.id)
    assert await _pttl(kept, "cx") <= 600_000 - 20


async def test_a_window_from_the_finish_starts_when_the_job_is_drained(queue: Queue) -> None:
    await queue.enqueue("w", dedup_key="dr", dedup_ttl=600, dedup_from="finish")
    assert await queue.drain() == 1
    assert 590_000 < await _pttl(queue, "dr") <= 600_000


async def test_a_batch_item_carries_its_window_and_keep(queue: Queue) -> None:
    (verdict,) = await queue.enqueue_many(
        [Item("w", dedup_key="b1", dedup_ttl=60, dedup_from="finish", result_ttl=30)]
    )
    assert await _pttl(queue, "b1") == -1
    assert await queue.complete(await claim_job(queue))
    assert 55_000 < await _pttl(queue, "b1") <= 60_000
    assert 25_000 < await queue.wire.call("PTTL", queue.keys.job(verdict.id)) <= 30_000


# -- a job's own result_ttl ---------------------------------------------------------------------


async def test_a_jobs_own_result_ttl_overrides_the_completing_queues(
    queue: Queue, kept: Queue
) -> None:
    longer = await queue.enqueue("a", result_ttl=120, dedup_key="k1")
    assert await queue.complete(await claim_job(queue))  # this queue keeps no rows
    assert 115_000 < await queue.wire.call("PTTL", queue.keys.job(longer.id)) <= 120_000
    info = await queue.job(longer.id)
    assert info is not None
    assert info.state == "completed"
    # The dedup key that lives with the row lives as long as the row's own keep.
    assert 115_000 < await _pttl(queue, "k1") <= 120_000
    none = await kept.enqueue("b", result_ttl=0, dedup_key="k2")
    assert await kept.complete(await claim_job(kept))  # this one keeps rows a minute
    assert await kept.job(none.id) is None
    assert await _pttl(kept, "k2") == -2


# -- bad values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"dedup_key": "k", "dedup_ttl": 5, "dedup_from": "send"}, "dedup_from"),
        ({"dedup_key": "k", "dedup_from": "finish"}, "dedup_ttl"),
        ({"result_ttl": -1}, "result_ttl"),
        ({"result_ttl": 31 * 86_400}, "result_ttl"),
        ({"result_ttl": "1h"}, "result_ttl"),
    ],
)
async def test_bad_window_and_keep_values_are_refused_before_any_write(
    queue: Queue, options: dict[str, object], argument: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await queue.enqueue("x", **options)  # type: ignore[arg-type]
    assert refused.value.argument == argument
    (verdict,) = await queue.enqueue_many([Item("x", **options)])  # type: ignore[arg-type]
    assert verdict.kind == "error"
    assert verdict.error is not None
    assert verdict.error.argument == argument  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgument) as refused:
        await queue.enqueue_in(1, "x", **options)
    assert refused.value.argument == argument
    assert await queue.wire.call("KEYS", queue.keys.root + "*") == []


# -- the task layer and the sync producer ------------------------------------------------------


@pytest.fixture
async def app(valkey_url: str, queue_name: str) -> AsyncIterator[App]:
    app = App(valkey_url, queue=queue_name)  # the app keeps results a day
    await app.connect()
    yield app
    queue = app.queue(queue_name)
    await queue.pause()
    await queue.obliterate(force=True)
    await app.close()


async def test_a_tasks_result_ttl_and_window_ride_its_jobs(app: App) -> None:
    # --8<-- [start:welcome]
    # Once per user for an hour after it ran; its result is kept 5 s (the app keeps a day).
    @app.task(result_ttl=5, dedup="user", dedup_ttl=3600, dedup_from="finish")
    async def welcome(user: str) -> str:
        return user

    # --8<-- [end:welcome]

    handle = await welcome.enqueue("u1")
    queue = app.queue(app.default_queue)
    assert await _pttl(queue, "u1") == -1
    assert (await welcome.enqueue("u1")).verdict.kind == "duplicate"
    assert await queue.complete(await claim_job(queue))  # with the app's day of keep
    assert 0 < await queue.wire.call("PTTL", queue.keys.job(handle.id)) <= 5_000
    assert HOUR_MS - 5000 < await _pttl(queue, "u1") <= HOUR_MS
    longer = await welcome.using(result_ttl=60).enqueue("u2")
    batched = await app.enqueue_many([welcome.using(result_ttl=30).call("u3")])
    for _ in range(2):
        assert await queue.complete(await claim_job(queue))
    assert 55_000 < await queue.wire.call("PTTL", queue.keys.job(longer.id)) <= 60_000
    assert 25_000 < await queue.wire.call("PTTL", queue.keys.job(batched[0].id)) <= 30_000


async def test_a_flow_refuses_a_calls_own_keep(app: App) -> None:
    @app.task
    async def step(n: int) -> int:
        return n

    with pytest.raises(InvalidArgument) as refused:
        await app.enqueue_flow(chain(step.using(result_ttl=5).call(1), step.receiving()))
    assert refused.value.argument == "result_ttl"


def test_a_task_refuses_bad_window_and_keep_values(app: App) -> None:
    async def fn(user: str) -> None: ...

    for options, argument in (
        ({"result_ttl": -1}, "result_ttl"),
        ({"dedup_from": "sent"}, "dedup_from"),
        ({"dedup": "user", "dedup_from": "finish"}, "dedup_ttl"),
    ):
        with pytest.raises(InvalidArgument) as refused:
            app.task(name=f"t-{argument}", **options)(fn)  # type: ignore[call-overload]
        assert refused.value.argument == argument
    task = app.task(fn)
    with pytest.raises(InvalidArgument) as refused:
        task.using(result_ttl=40 * 86_400)
    assert refused.value.argument == "result_ttl"


@pytest.fixture
def sync_queue(valkey_url: str, queue_name: str) -> Iterator[SyncQueue]:
    with SyncQueue.connect(valkey_url, queue_name) as q:
        yield q


async def test_the_sync_producer_sends_the_window_and_keep(
    sync_queue: SyncQueue, queue: Queue
) -> None:
    verdict = sync_queue.enqueue("w", dedup_key="s1", dedup_ttl=60, dedup_from="finish")
    kept = sync_queue.enqueue("w", result_ttl=30)
    (item,) = sync_queue.enqueue_many([Item("w", dedup_key="s2", dedup_from="finish", dedup_ttl=9)])
    assert await _pttl(queue, "s1") == -1
    for _ in range(3):
        assert await queue.complete(await claim_job(queue))
    assert 55_000 < await _pttl(queue, "s1") <= 60_000
    assert 5_000 < await _pttl(queue, "s2") <= 9_000
    assert 25_000 < await queue.wire.call("PTTL", queue.keys.job(kept.id)) <= 30_000
    assert verdict.kind == item.kind == "enqueued"
    with pytest.raises(InvalidArgument) as refused:
        sync_queue.enqueue("w", dedup_key="s3", dedup_from="later", dedup_ttl=1)
    assert refused.value.argument == "dedup_from"

"""Results and status: a queue with ``result_ttl`` keeps a completed job's row (its result, when
it finished) for that long; dead jobs carry ``finished`` and their traceback; ``Queue.wait``
wakes on the script's own announcement on the ``done`` channel, without polling."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator

import pytest

from echomq import Consumer, ConsumerOptions, Fixed, InvalidArgument, Item, Job, Queue
from echomq.consumers import RetryPlan
from echomq.engine import Completed, Failed
from echomq.engine.events import Subscription
from echomq.engine.keys import VERSION_KEY
from echomq.engine.transitions import Failure, Success
from echomq.errors import ArgumentRefused, EchoMQError, VersionFenceError
from echomq.testing import claim_job, discard, server_ms, wait_for_server_ms
from echomq.wire.connector import WIRE_VERSION, Connector
from echomq.wire.url import ConnectionOptions

TTL = 60.0


@pytest.fixture
async def kept(valkey_url: str, queue_name: str) -> AsyncIterator[Queue]:
    """A queue that keeps completed rows for a minute."""
    q = await Queue.connect(valkey_url, queue_name, result_ttl=TTL)
    yield q
    await discard(q)


async def test_completed_row_is_kept_with_its_result_and_finished(kept: Queue) -> None:
    verdict = await kept.enqueue({"n": 1})
    job = await claim_job(kept)
    before = await server_ms(kept)
    assert await kept.complete(job, result={"sum": 3})
    info = await kept.job(verdict.id)
    assert info is not None
    assert (info.state, info.result, info.payload) == ("completed", {"sum": 3}, {"n": 1})
    assert info.finished is not None
    assert before / 1000 <= info.finished <= before / 1000 + 5
    assert await kept.state(verdict.id) == "completed"
    ttl_ms = await kept.wire.call("PTTL", kept.keys.job(verdict.id))
    assert TTL * 1000 - 5000 < ttl_ms <= TTL * 1000
    assert await kept.wire.call("ZSCORE", kept.keys.done, verdict.id) is not None
    assert await kept.wire.call("ZCARD", kept.keys.active) == 0
    assert (await kept.counts()).completed == 1
    # Completing again is this claim's second settle: refused, the row untouched.
    assert await kept.complete_each([job]) == ["settled"]


async def test_without_result_ttl_completion_deletes_the_row(queue: Queue) -> None:
    verdict = await queue.enqueue("x")
    assert await queue.complete(await claim_job(queue), result="ignored")
    assert await queue.job(verdict.id) is None
    assert await queue.wire.call("EXISTS", queue.keys.done) == 0


async def test_complete_each_keeps_each_result(kept: Queue) -> None:
    ids = [v.id for v in await kept.enqueue_many(range(3))]
    jobs = await kept.claim_batch(3)
    assert isinstance(jobs, list)
    items = [Completed(jobs[0], "a"), jobs[1], Completed(jobs[2], [1, 2])]
    assert await kept.complete_each(items) == ["completed"] * 3
    results = [(await kept.job(i)) for i in ids]
    assert [r.result for r in results if r is not None] == ["a", None, [1, 2]]


async def test_a_kept_row_expires_after_the_ttl_and_the_index_forgets_it(
    valkey_url: str, queue_name: str
) -> None:
    q = await Queue.connect(valkey_url, queue_name, result_ttl=0.05)
    try:
        first = await q.enqueue(1)
        await q.complete(await claim_job(q))
        info = await q.job(first.id)
        assert info is not None
        assert info.finished is not None
        await wait_for_server_ms(q, int(info.finished * 1000) + 60)
        assert await q.job(first.id) is None
        assert await q.wait(first.id, timeout=5) is None  # expired: absent, answered at once
        second = await q.enqueue(2)
        await q.complete(await claim_job(q))  # trims the expired member
        members = await q.wire.call("ZRANGE", q.keys.done, 0, -1)
        assert [m.decode() for m in members] == [second.id]
    finally:
        await discard(q)


async def test_a_shorter_ttl_does_not_drop_longer_kept_rows_from_the_index(
    valkey_url: str, queue_name: str
) -> None:
    # Two consumers of one queue keep results for 60 s and 50 ms: the index is scored by each
    # row's expiry, so trimming after the short rows expired leaves the long one findable.
    long = await Queue.connect(valkey_url, queue_name, result_ttl=60)
    short = Queue(queue_name, long.wire, result_ttl=0.05)
    try:
        first = await long.enqueue(1)
        await long.complete(await claim_job(long))
        info = await long.job(first.id)
        assert info is not None
        assert info.finished is not None
        score = float(await long.wire.call("ZSCORE", long.keys.done, first.id))
        assert score == int(info.finished * 1000) + 60_000  # the row's expiry
        second = await short.enqueue(2)
        await short.complete(await claim_job(short))
        await wait_for_server_ms(short, await server_ms(short) + 60)
        third = await short.enqueue(3)
        await short.complete(await claim_job(short))  # trims the expired second
        members = await long.wire.call("ZRANGE", long.keys.done, 0, -1)
        assert sorted(m.decode() for m in members) == sorted([first.id, third.id])
        assert second.id not in [m.decode() for m in members]
        assert await long.drain(results=True) == 2  # the index's two: the first is found
        assert await long.job(first.id) is None
    finally:
        await short.close()
        await discard(long)


async def test_a_dedup_key_lives_as_long_as_the_kept_row(kept: Queue) -> None:
    first = await kept.enqueue("a", dedup_key="order-1")
    await kept.complete(await claim_job(kept))
    ttl_ms = await kept.wire.call("PTTL", kept.keys.dedup("order-1"))
    assert TTL * 1000 - 5000 < ttl_ms <= TTL * 1000
    again = await kept.enqueue("b", dedup_key="order-1")
    assert (again.kind, again.id) == ("duplicate", first.id)


async def test_a_dedup_key_with_its_own_ttl_holds_for_it_after_completion(kept: Queue) -> None:
    first = await kept.enqueue("a", dedup_key="order-2", dedup_ttl=600)
    await kept.complete(await claim_job(kept))
    ttl_ms = await kept.wire.call("PTTL", kept.keys.dedup("order-2"))
    assert ttl_ms > TTL * 1000  # its own 600 s, not the row's 60 s
    assert (await kept.enqueue("b", dedup_key="order-2")).id == first.id


async def test_a_batch_item_carries_its_dedup_ttl(kept: Queue) -> None:
    (verdict,) = await kept.enqueue_many([Item("a", dedup_key="order-4", dedup_ttl=600)])
    ttl_ms = await kept.wire.call("PTTL", kept.keys.dedup("order-4"))
    assert 0 < ttl_ms <= 600_000
    assert (await kept.enqueue("b", dedup_key="order-4")).id == verdict.id


async def test_without_result_ttl_the_dedup_key_goes_with_the_row(queue: Queue) -> None:
    await queue.enqueue("a", dedup_key="order-3")
    await queue.complete(await claim_job(queue))
    assert await queue.wire.call("EXISTS", queue.keys.dedup("order-3")) == 0


async def test_a_dedup_key_with_its_own_ttl_outlives_a_completion_that_deletes_the_row(
    queue: Queue,
) -> None:
    # result_ttl 0: the row goes at completion; the key's own hour counts from enqueue.
    first = await queue.enqueue("a", dedup_key="welcome-u1", dedup_ttl=3600)
    await queue.complete(await claim_job(queue))
    assert await queue.job(first.id) is None
    again = await queue.enqueue("b", dedup_key="welcome-u1")
    assert (again.kind, again.id) == ("duplicate", first.id)
    assert 3_590_000 < await queue.wire.call("PTTL", queue.keys.dedup("welcome-u1")) <= 3_600_000


async def test_obliterate_deletes_a_dedup_key_that_outlived_its_row(queue: Queue) -> None:
    await queue.enqueue("a", dedup_key="welcome-u2", dedup_ttl=3600)
    await queue.complete(await claim_job(queue))  # the row is gone, the key lives on
    await queue.pause()
    await queue.obliterate(force=True)
    assert await queue.wire.call("EXISTS", queue.keys.dedup("welcome-u2")) == 0
    assert await queue.wire.call("KEYS", f"{queue.keys.root}*") == []


async def test_remove_and_drain_leave_a_dedup_key_with_its_own_ttl_alone(kept: Queue) -> None:
    own = (await kept.enqueue("a", dedup_key="own-1", dedup_ttl=600)).id
    plain = (await kept.enqueue("b", dedup_key="plain-1")).id
    assert await kept.remove(own)
    assert await kept.remove(plain)
    await kept.enqueue("c", dedup_key="own-2", dedup_ttl=600)
    await kept.enqueue("d", dedup_key="plain-2")
    assert await kept.drain() == 2
    # A key without a TTL lives as long as its row, the kept completed row included.
    await kept.enqueue("e", dedup_key="plain-3")
    await kept.complete(await claim_job(kept))
    assert await kept.drain(results=True) == 1
    exists = [
        await kept.wire.call("EXISTS", kept.keys.dedup(key))
        for key in ("own-1", "plain-1", "own-2", "plain-2", "plain-3")
    ]
    assert exists == [1, 0, 1, 0, 0]
    assert (await kept.enqueue("f", dedup_key="own-1")).id == own  # still a duplicate


@pytest.mark.parametrize("ttl", [-1, 30 * 86_400 + 1, float("nan"), "60", True])
async def test_result_ttl_is_bounded_at_construction(queue: Queue, ttl: object) -> None:
    with pytest.raises(InvalidArgument) as refused:
        Queue(queue.name, queue.wire, result_ttl=ttl)  # type: ignore[arg-type]
    assert refused.value.argument == "result_ttl"


async def test_a_result_the_codec_refuses_is_refused_before_any_write(kept: Queue) -> None:
    await kept.enqueue("x")
    job = await claim_job(kept)
    with pytest.raises(InvalidArgument) as refused:
        await kept.complete(job, result=object())
    assert refused.value.argument == "result"
    with pytest.raises(InvalidArgument):
        await kept.complete_each([Completed(job, "ok"), Completed(job, {1j})])
    assert await kept.state(job.id) == "active"


async def test_the_script_refuses_a_bad_ttl_before_any_write(kept: Queue) -> None:
    await kept.enqueue("x")
    job = await claim_job(kept)
    (code,) = await kept.engine.complete([Success(job.id, job.attempts, b"1")], -5)
    assert isinstance(code, ArgumentRefused)
    assert "ttl" in str(code)
    assert await kept.state(job.id) == "active"


# -- dead jobs: finished and traceback ---------------------------------------------------------


async def test_a_dead_job_carries_finished_and_its_traceback(queue: Queue) -> None:
    verdict = await queue.enqueue("x")
    job = await claim_job(queue)
    outcome = await queue.retry(job, max_attempts=1, error="KeyError: 'k'", traceback="Trace…")
    assert outcome == "dead"
    info = await queue.job(verdict.id)
    assert info is not None
    assert (info.state, info.last_error, info.traceback) == ("dead", "KeyError: 'k'", "Trace…")
    assert info.finished is not None


async def test_a_traceback_is_bounded_to_its_last_8_kib(queue: Queue) -> None:
    verdict = await queue.enqueue("x")
    job = await claim_job(queue)
    long = "".join(f"line {n} ünïcode\n" for n in range(2000)) + "the end"
    await queue.retry_each([Failed(job, "E: e", 0.0, 1, long)])
    info = await queue.job(verdict.id)
    assert info is not None
    assert info.traceback is not None
    assert len(info.traceback.encode()) <= 8192
    assert info.traceback.endswith("line 1999 ünïcode\nthe end")
    assert info.traceback.startswith("…")


async def test_the_latest_attempt_keeps_its_traceback_alone(queue: Queue) -> None:
    verdict = await queue.enqueue("x")
    await queue.retry(await claim_job(queue), error="E: 1", traceback="first")
    await queue.promote()
    info = await queue.job(verdict.id)
    assert info is not None
    assert info.traceback == "first"
    await queue.retry(await claim_job(queue), error="retry requested")  # a signal: none
    info = await queue.job(verdict.id)
    assert info is not None
    assert (info.last_error, info.traceback) == ("retry requested", None)


async def test_the_script_refuses_an_oversized_traceback_before_any_write(queue: Queue) -> None:
    await queue.enqueue("x")
    job = await claim_job(queue)
    (code,) = await queue.engine.retry([Failure(job.id, job.attempts, 0, 1, "E", "x" * 8193)])
    assert isinstance(code, EchoMQError)
    assert "traceback" in str(code)
    assert await queue.state(job.id) == "active"


async def test_reprocess_clears_finished_and_traceback(queue: Queue) -> None:
    verdict = await queue.enqueue("x")
    await queue.retry(await claim_job(queue), max_attempts=1, error="E", traceback="tb")
    assert await queue.reprocess(verdict.id)
    info = await queue.job(verdict.id)
    assert info is not None
    assert (info.state, info.finished, info.traceback) == ("pending", None, None)


# -- the consumer: return values and tracebacks ------------------------------------------------


async def test_a_handler_return_value_becomes_the_result(kept: Queue) -> None:
    verdict = await kept.enqueue(20)

    async def double(job: Job) -> int:
        return 2 * int(job.payload)

    consumer = Consumer(kept, double, ConsumerOptions(beat=0.05))
    running = asyncio.ensure_future(consumer.run())
    try:
        info = await kept.wait(verdict.id, timeout=10)
    finally:
        consumer.stop()
        await running
    assert info is not None
    assert (info.state, info.result) == ("completed", 40)


async def test_an_unexpected_exception_is_logged_at_error_with_its_traceback_and_kept(
    kept: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    verdict = await kept.enqueue("x")

    async def broken(job: Job) -> None:
        {}["missing"]

    options = ConsumerOptions(beat=0.05, max_attempts=1, backoff=Fixed(0.0))
    consumer = Consumer(kept, broken, options)
    running = asyncio.ensure_future(consumer.run())
    with caplog.at_level(logging.ERROR, logger="echomq.consumer"):
        try:
            info = await kept.wait(verdict.id, timeout=10)
        finally:
            consumer.stop()
            await running
    assert info is not None
    assert info.state == "dead"
    assert info.last_error == "KeyError: 'missing'"
    assert info.traceback is not None
    assert "in broken" in info.traceback
    assert info.traceback.rstrip().endswith("KeyError: 'missing'")
    records = [r for r in caplog.records if verdict.id in r.getMessage()]
    failed = [r for r in records if r.levelno == logging.ERROR and r.exc_info]
    assert len(failed) == 1, [r.getMessage() for r in records]


async def test_a_failure_policy_decides_error_delay_attempts_and_traceback(
    kept: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    verdict = await kept.enqueue({"kind": "fragile"})
    seen: list[tuple[int, str]] = []

    def policy(job: Job, exc: Exception) -> RetryPlan:
        seen.append((job.attempts, type(exc).__name__))
        # Fragile jobs get two attempts, no delay, and a short error without a traceback.
        return RetryPlan(f"fragile: {exc}", 0.0, 2, traceback=False)

    async def broken(job: Job) -> None:
        raise ValueError("nope")

    options = ConsumerOptions(beat=0.05, max_attempts=10, backoff=Fixed(60.0))
    consumer = Consumer(kept, broken, options, policy=policy)
    running = asyncio.ensure_future(consumer.run())
    with caplog.at_level(logging.WARNING, logger="echomq.consumer"):
        try:
            info = await kept.wait(verdict.id, timeout=10)
        finally:
            consumer.stop()
            await running
    assert seen == [(1, "ValueError"), (2, "ValueError")]  # the policy's 2, not the options' 10
    assert info is not None
    assert (info.state, info.last_error, info.traceback) == ("dead", "fragile: nope", None)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


# -- wait ----------------------------------------------------------------------------------------


async def test_wait_wakes_on_complete(kept: Queue) -> None:
    verdict = await kept.enqueue("x")
    job = await claim_job(kept)
    waiting = asyncio.ensure_future(kept.wait(verdict.id, timeout=10))
    await _until_waiting(kept, 1)
    await kept.complete(job, result="done")
    info = await waiting
    assert info is not None
    assert (info.state, info.result) == ("completed", "done")


async def test_wait_wakes_on_dead(queue: Queue) -> None:
    verdict = await queue.enqueue("x")
    job = await claim_job(queue)
    waiting = asyncio.ensure_future(queue.wait(verdict.id))
    await _until_waiting(queue, 1)
    await queue.retry(job, max_attempts=1, error="E: boom")
    info = await waiting
    assert info is not None
    assert (info.state, info.last_error) == ("dead", "E: boom")


async def test_wait_wakes_on_a_stalled_burial(queue: Queue) -> None:
    verdict = await queue.enqueue("x")
    job = await queue.claim(lease=0.03)
    waiting = asyncio.ensure_future(queue.wait(verdict.id, timeout=10))
    await _until_waiting(queue, 1)
    await wait_for_server_ms(queue, job.deadline_ms)  # type: ignore[union-attr]
    assert (await queue.reap(max_stalled=1)).dead == [verdict.id]
    info = await waiting
    assert info is not None
    assert (info.state, info.last_error) == ("dead", "stalled")
    assert info.finished is not None


async def test_wait_after_the_completion_answers_at_once(kept: Queue) -> None:
    verdict = await kept.enqueue("x")
    await kept.complete(await claim_job(kept), result=7)
    info = await kept.wait(verdict.id, timeout=10)
    assert info is not None
    assert info.result == 7


async def test_wait_answers_none_at_once_for_a_job_that_does_not_exist(kept: Queue) -> None:
    assert await asyncio.wait_for(kept.wait("JOB0KHTOWnGLuC"), 5) is None


async def test_wait_times_out_with_none(kept: Queue) -> None:
    verdict = await kept.enqueue("x")
    assert await kept.wait(verdict.id, timeout=0.05) is None
    assert kept._waiters.waits == 0


async def test_wait_on_a_queue_without_results_answers_none_once_it_completes(
    queue: Queue,
) -> None:
    verdict = await queue.enqueue("x")
    job = await claim_job(queue)
    waiting = asyncio.ensure_future(queue.wait(verdict.id, timeout=10))
    await _until_waiting(queue, 1)
    await queue.complete(job)
    assert await asyncio.wait_for(waiting, 5) is None


async def test_wait_refuses_bad_arguments(kept: Queue) -> None:
    with pytest.raises(InvalidArgument):
        await kept.wait("nope")
    with pytest.raises(InvalidArgument):
        await kept.wait("JOB0KHTOWnGLuC", timeout=-1)


async def test_wait_survives_client_kill_of_its_connection(kept: Queue) -> None:
    verdict = await kept.enqueue("x")
    job = await claim_job(kept)
    waiting = asyncio.ensure_future(kept.wait(verdict.id, timeout=20))
    await _until_waiting(kept, 1)
    subscription = kept._waiters.subscription
    assert subscription is not None
    generation = subscription.generation
    client_id = await subscription.connector.call("CLIENT", "ID")
    async with Connector(subscription.connector.options, version_fence=None) as admin:
        assert await admin.call("CLIENT", "KILL", "ID", client_id) == 1
    # Completed while the socket is down: no message reaches it; the read after the
    # re-subscription finds the job completed.
    await kept.complete(job, result="while down")
    info = await asyncio.wait_for(waiting, 15)
    assert info is not None
    assert info.result == "while down"
    assert subscription.generation > generation
    # And the re-subscribed channel carries messages again.
    second = await kept.enqueue("y")
    job = await claim_job(kept)
    waiting = asyncio.ensure_future(kept.wait(second.id, timeout=20))
    await _until_waiting(kept, 1)
    await kept.complete(job, result="after")
    info = await asyncio.wait_for(waiting, 15)
    assert info is not None
    assert info.result == "after"


async def test_many_concurrent_waits_share_one_subscription(kept: Queue) -> None:
    verdicts = await kept.enqueue_many(range(300))
    waits = [asyncio.ensure_future(kept.wait(v.id, timeout=30)) for v in verdicts]
    waits += [asyncio.ensure_future(kept.wait(verdicts[0].id, timeout=30))]  # two on one id
    await _until_waiting(kept, len(waits))
    numsub = await kept.wire.call("PUBSUB", "SHARDNUMSUB", kept.keys.done)
    assert int(numsub[1]) == 1
    while (jobs := await kept.claim_batch(100)) and isinstance(jobs, list):
        await kept.complete_each([Completed(j, j.payload * 2) for j in jobs])
    infos = await asyncio.gather(*waits)
    assert [i.result for i in infos if i is not None] == [n * 2 for n in range(300)] + [0]
    assert kept._waiters.waits == 0


async def test_close_ends_waits_in_progress(valkey_url: str, queue_name: str) -> None:
    q = await Queue.connect(valkey_url, queue_name, result_ttl=TTL)
    verdict = await q.enqueue("x")
    waiting = asyncio.ensure_future(q.wait(verdict.id))
    await _until_waiting(q, 1)
    other = await Queue.connect(valkey_url, queue_name)
    try:
        await q.close()
        with pytest.raises(EchoMQError):
            await asyncio.wait_for(waiting, 5)
    finally:
        await discard(other)


# -- a wait ends when the row is deleted --------------------------------------------------------


async def test_wait_answers_none_once_remove_deletes_the_row(kept: Queue) -> None:
    verdict = await kept.enqueue("x")
    waiting = asyncio.ensure_future(kept.wait(verdict.id))
    await _until_waiting(kept, 1)
    assert await kept.remove(verdict.id)
    assert await asyncio.wait_for(waiting, 5) is None


async def test_wait_answers_none_once_a_lane_drain_deletes_the_row(kept: Queue) -> None:
    verdict = await kept.enqueue("x", lane="acme")
    waiting = asyncio.ensure_future(kept.wait(verdict.id))
    await _until_waiting(kept, 1)
    assert await kept.lane("acme").drain() == 1
    assert await asyncio.wait_for(waiting, 5) is None


async def test_wait_answers_none_once_a_drain_deletes_the_scheduled_row(kept: Queue) -> None:
    verdict = await kept.enqueue_in(600, "x")
    waiting = asyncio.ensure_future(kept.wait(verdict.id))
    await _until_waiting(kept, 1)
    assert await kept.drain(schedule=True) == 1
    assert await asyncio.wait_for(waiting, 5) is None


async def test_a_drain_of_many_rows_wakes_every_wait_with_one_wildcard(kept: Queue) -> None:
    leased = await kept.enqueue("leased")
    job = await claim_job(kept)
    ids = [v.id for v in await kept.enqueue_many(range(150))]
    async with _Messages(kept) as channel:
        waits = [asyncio.ensure_future(kept.wait(i)) for i in ids]
        held = asyncio.ensure_future(kept.wait(leased.id))
        await _until_waiting(kept, len(ids) + 1)
        assert await kept.drain() == 150
        assert await asyncio.wait_for(asyncio.gather(*waits), 5) == [None] * 150
        await channel.connector.call("PING")  # the channel's messages arrived before the pong
        assert channel.messages == [b"*"]
    # The leased job's wait re-read its row, found it active and waits on.
    assert not held.done()
    await kept.complete(job, result="still mine")
    info = await asyncio.wait_for(held, 5)
    assert info is not None
    assert info.result == "still mine"


async def test_wait_answers_none_once_obliterate_deletes_the_row(kept: Queue) -> None:
    verdict = await kept.enqueue("x")
    async with _Messages(kept) as channel:
        waiting = asyncio.ensure_future(kept.wait(verdict.id))
        await _until_waiting(kept, 1)
        await kept.pause()
        await kept.obliterate()
        assert await asyncio.wait_for(waiting, 5) is None
        await channel.connector.call("PING")
        assert channel.messages == [b"*"]


class _Messages(Subscription):
    """Every raw message of a queue's ``done`` channel, in order."""

    def __init__(self, queue: Queue) -> None:
        super().__init__(queue.wire.options, queue.keys.done, sharded=True)
        self.messages: list[bytes] = []

    def _deliver(self, message: bytes) -> None:
        self.messages.append(message)


# -- the subscription's own tasks -------------------------------------------------------------


async def test_a_retarget_the_subscription_starts_is_held_until_it_ends(
    kept: Queue, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loop keeps only weak references to tasks: one nothing else holds, parked on a
    # future nothing else holds, is collected mid-flight ("Task was destroyed but it is
    # pending!"). The subscription holds its own, and its close ends them.
    verdict = await kept.enqueue("x")
    waiting = asyncio.ensure_future(kept.wait(verdict.id, timeout=20))
    await _until_waiting(kept, 1)
    subscription = kept._waiters.subscription
    assert subscription is not None
    started, ended = asyncio.Event(), asyncio.Event()

    async def retarget(*, moved: bool = False) -> None:
        started.set()
        try:
            await asyncio.get_running_loop().create_future()  # referenced by this frame alone
        finally:
            ended.set()

    monkeypatch.setattr(subscription.connector, "retarget", retarget, raising=False)
    subscription._on_push([b"sunsubscribe", subscription.channel.encode(), 0])
    await asyncio.wait_for(started.wait(), 5)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        gc.collect()
        await asyncio.sleep(0)
        await kept._waiters.close()
        await asyncio.wait_for(ended.wait(), 5)  # cancelled by the close, not collected
    assert "Task was destroyed" not in caplog.text
    with pytest.raises(EchoMQError):
        await waiting


# -- the wire version -----------------------------------------------------------------------


async def test_a_process_of_an_older_wire_version_is_refused_by_a_deployment_of_this_one(
    valkey_url: str,
) -> None:
    db = 9  # a database of its own, so no other test ever sees the fence move
    options = ConnectionOptions.from_url(valkey_url).replace(db=db)
    async with Connector(options, version_fence=None) as cleaner:
        await cleaner.call("DEL", VERSION_KEY)
    try:
        async with Connector(options) as new:
            assert await new.call("GET", VERSION_KEY) == WIRE_VERSION.encode()
        # 3 would retry cancelled jobs; 4 was abort or flows alone; 5 would claim past an
        # ordered lane's holder.
        for older in ("echomq:1", "echomq:3", "echomq:4", "echomq:5"):
            with pytest.raises(VersionFenceError, match=f"'{WIRE_VERSION}'"):
                await Connector(options, version_fence=older).connect()
    finally:
        async with Connector(options, version_fence=None) as cleaner:
            await cleaner.call("DEL", VERSION_KEY)


# -- the admin verbs find kept rows -----------------------------------------------------------


async def test_remove_drain_and_obliterate_delete_kept_rows(kept: Queue) -> None:
    ids = [v.id for v in await kept.enqueue_many(range(3))]
    jobs = await kept.claim_batch(3)
    assert isinstance(jobs, list)
    await kept.complete_many(jobs)
    assert await kept.remove(ids[0])
    assert await kept.job(ids[0]) is None
    assert await kept.drain() == 0  # kept results are not pending work
    assert await kept.drain(results=True) == 2
    assert [await kept.job(i) for i in ids[1:]] == [None, None]
    last = await kept.enqueue("y", dedup_key="d")
    await kept.complete(await claim_job(kept))
    own = await kept.enqueue("z", dedup_key="own", dedup_ttl=600)
    await kept.pause()
    await kept.obliterate()  # deletes everything, a dedup key with its own TTL included
    keys = (kept.keys.done, kept.keys.dedup("d"), kept.keys.job(last.id), kept.keys.dedup("own"))
    for key in (*keys, kept.keys.job(own.id)):
        assert await kept.wire.call("EXISTS", key) == 0


async def _until_waiting(queue: Queue, n: int) -> None:
    """Until ``n`` waits of ``queue`` are registered and its subscription is confirmed."""
    hub = queue._waiters
    while hub.waits < n or hub.subscription is None:
        await asyncio.sleep(0.001)

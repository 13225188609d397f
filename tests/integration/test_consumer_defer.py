"""The ``Defer`` signal against a real Valkey: the job runs again later and no attempt is spent."""

from __future__ import annotations

import asyncio

from echomq import Consumer, ConsumerOptions, Defer, Job, Queue, Retry
from echomq.testing import claim_job


async def test_deferrals_spend_no_attempts(queue: Queue) -> None:
    """Five deferrals then two failures with max_attempts=3: the job still completes."""
    seen: list[int] = []
    done = asyncio.Event()

    async def handler(job: Job) -> None:
        seen.append(job.attempts)
        if len(seen) <= 5:
            raise Defer(0.01, "over budget")
        if len(seen) <= 7:
            raise Retry(0.01, "flaky")
        done.set()

    consumer = Consumer(queue, handler, ConsumerOptions(beat=0.05, max_attempts=3))
    running = asyncio.ensure_future(consumer.run())
    verdict = await queue.enqueue("later")
    await asyncio.wait_for(done.wait(), 10.0)
    consumer.stop()
    tally = await running
    assert seen == [1, 2, 3, 4, 5, 6, 7, 8]  # the token still advances with every claim
    assert (tally.deferred, tally.retried, tally.completed, tally.dead) == (5, 2, 1, 0)
    assert await queue.job(verdict.id) is None


async def test_failures_count_failed_attempts_not_deferrals(queue: Queue) -> None:
    """``JobInfo.failures`` (read in the handler: the attempt in hand counts) skips deferrals."""
    failures: list[int] = []
    done = asyncio.Event()

    async def handler(job: Job) -> None:
        info = await queue.job(job.id)
        assert info is not None
        failures.append(info.failures)
        if len(failures) <= 2:
            raise Defer(0.01, "over budget")
        if len(failures) <= 4:
            raise Retry(0.01, "flaky")
        done.set()

    consumer = Consumer(queue, handler, ConsumerOptions(beat=0.05, max_attempts=3))
    running = asyncio.ensure_future(consumer.run())
    await queue.enqueue("later")
    await asyncio.wait_for(done.wait(), 10.0)
    consumer.stop()
    await running
    assert failures == [1, 1, 1, 2, 3]


async def test_a_deferred_job_waits_at_least_its_delay(queue: Queue) -> None:
    claimed_at: list[float] = []
    done = asyncio.Event()

    async def handler(job: Job) -> None:
        claimed_at.append(asyncio.get_running_loop().time())
        if len(claimed_at) == 1:
            raise Defer(0.3)
        done.set()

    consumer = Consumer(queue, handler, ConsumerOptions(beat=0.05))
    running = asyncio.ensure_future(consumer.run())
    await queue.enqueue("once")
    await asyncio.wait_for(done.wait(), 10.0)
    consumer.stop()
    await running
    assert claimed_at[1] - claimed_at[0] >= 0.29  # the server clock's ms rounding allowance


async def test_a_lane_benched_by_its_rate_is_served_when_its_window_ends(queue: Queue) -> None:
    """Not at the next idle upkeep (10 s here): the claim said when the lane returns."""
    done: list[float] = []
    finished = asyncio.Event()

    async def handler(job: Job) -> None:
        done.append(asyncio.get_running_loop().time())
        if len(done) == 3:
            finished.set()

    await queue.lane("paced").rate(1, 0.3)
    for n in range(3):
        await queue.enqueue(n, lane="paced")
    options = ConsumerOptions(beat=1.0, idle_upkeep=10.0)
    consumer = Consumer(queue, handler, options)
    running = asyncio.ensure_future(consumer.run())
    await asyncio.wait_for(finished.wait(), 10.0)
    consumer.stop()
    await running
    assert done[2] - done[0] < 2.0  # two windows of 0.3 s, with room for a loaded machine


async def test_a_job_enqueued_into_a_lane_whose_window_is_spent_waits_for_the_window(
    queue: Queue,
) -> None:
    """The lane was empty when its window was spent, so nothing had benched it: the enqueue
    must, or the job would wait for another enqueue after the window ends."""
    await queue.lane("paced").rate(1, 0.3)
    await queue.enqueue("first", lane="paced")
    first = await claim_job(queue)
    await queue.complete(first)
    await queue.enqueue("second", lane="paced")
    assert not await queue.claim()  # the window is spent
    assert (await queue.lane("paced").info()).rate_wait > 0
    await asyncio.sleep(0.35)  # the thing under test is the window's end itself
    await queue.upkeep()
    second = await claim_job(queue)
    assert second.payload == "second"

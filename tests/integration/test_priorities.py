"""Priority bands (issue 26 part 1): the claim serves the most urgent band with a serviceable lane;
within a band the lanes rotate by weight as before; a lane serves its jobs by priority, then mint
order; every gate holds across bands; put-backs keep a job's priority."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from echomq import App, InvalidArgument, Queue
from echomq.engine import connect_sync_queue
from echomq.engine.queue import Item
from echomq.engine.results import Job
from echomq.engine.sharded import ShardedQueue
from echomq.testing import discard


@pytest.fixture
async def queue(valkey_url: str, queue_name: str, queue_kind: str) -> AsyncIterator[Queue]:
    # ALSO_SHARDED (tests/conftest.py): 3 shards, their loads read at every claim.
    sharded = {"shards": 3, "refresh": 0.0} if queue_kind == "sharded" else {}
    opener = ShardedQueue.connect if sharded else Queue.connect
    q = await opener(valkey_url, queue_name, pool_size=1, events=False, **sharded)
    yield q
    await discard(q)


async def claims(queue: Queue, n: int) -> list[Any]:
    """The payloads of ``n`` single claims (each must find a job)."""
    out = []
    for _ in range(n):
        job = await queue.claim()
        assert isinstance(job, Job), job
        out.append(job.payload)
    return out


async def test_a_high_band_is_served_first_while_low_lanes_keep_their_weights(
    queue: Queue,
) -> None:
    await queue.lane("heavy").weight(3)
    await queue.enqueue_many([Item(f"h{n}", lane="heavy") for n in range(6)])
    await queue.enqueue_many([Item(f"l{n}", lane="light") for n in range(2)])
    await queue.enqueue_many([Item(f"u{n}", lane="urgent", priority=8) for n in range(2)])
    await queue.enqueue("v0", lane="vip", priority=9)
    assert await queue.ring() == ["vip", "urgent", "heavy", "light"]
    assert (await queue.counts()).ringed == 4
    served = await claims(queue, 11)
    assert served[:3] == ["v0", "u0", "u1"]
    assert served[3:] == ["h0", "h1", "h2", "l0", "h3", "h4", "h5", "l1"]
    assert not isinstance(await queue.claim(), Job)
    assert await queue.ring() == []


@pytest.mark.one_slot("the order across lanes a and b is one ring's")
async def test_a_lane_serves_by_priority_then_mint_order_and_follows_its_head(
    queue: Queue,
) -> None:
    await queue.enqueue("a5", lane="a")
    await queue.enqueue("a2", lane="a", priority=2)
    await queue.enqueue("a9", lane="a", priority=9)
    await queue.enqueue("a5b", lane="a")
    await queue.enqueue_many([Item("b5", lane="b"), Item("b5b", lane="b")])
    # a's head is in band 9: it sits on that ring; once served, a rejoins the default band
    # behind b; its band-2 job waits for the default band to run dry.
    assert await queue.ring() == ["a", "b"]
    assert await claims(queue, 6) == ["a9", "b5", "a5", "b5b", "a5b", "a2"]


async def test_a_more_urgent_job_moves_its_lane_to_its_band_at_once(queue: Queue) -> None:
    await queue.enqueue_many([Item("x", lane="a"), Item("y", lane="b")])
    await queue.enqueue("b9", lane="b", priority=9)
    assert await queue.ring() == ["b", "a"]
    assert await claims(queue, 3) == ["b9", "x", "y"]


async def test_a_paused_cooling_or_full_high_lane_lets_the_low_band_be_served(
    queue: Queue,
) -> None:
    await queue.enqueue_many([Item(f"hi{n}", lane="hi", priority=9) for n in range(3)])
    await queue.enqueue_many([Item(f"lo{n}", lane="lo", priority=0) for n in range(3)])
    await queue.lane("hi").pause()
    assert await claims(queue, 1) == ["lo0"]
    await queue.lane("hi").resume()
    await queue.lane("hi").cool(60)
    assert await claims(queue, 1) == ["lo1"]
    await queue.lane("hi").uncool()
    await queue.lane("hi").limit(1)
    first = await queue.claim()
    assert isinstance(first, Job)
    assert first.payload == "hi0"
    assert await claims(queue, 1) == ["lo2"]  # hi is at its ceiling
    await queue.complete(first)
    assert await claims(queue, 1) == ["hi1"]


async def test_a_lane_rate_holds_across_bands(queue: Queue) -> None:
    await queue.lane("hi").rate(1, 60)
    await queue.enqueue_many([Item(f"hi{n}", lane="hi", priority=9) for n in range(2)])
    await queue.enqueue("lo", lane="lo", priority=1)
    assert await claims(queue, 2) == ["hi0", "lo"]
    assert not isinstance(await queue.claim(), Job)  # hi's budget is spent for a minute


async def test_an_ordered_lane_is_held_across_bands(queue: Queue) -> None:
    await queue.ordered(True)
    await queue.enqueue_many([Item(f"hi{n}", lane="hi", priority=9) for n in range(2)])
    await queue.enqueue("lo", lane="lo")
    held = await queue.claim()
    assert isinstance(held, Job)
    assert held.payload == "hi0"
    assert await claims(queue, 1) == ["lo"]  # hi is held by hi0
    assert not isinstance(await queue.claim(), Job)
    await queue.complete(held)
    assert await claims(queue, 1) == ["hi1"]


async def test_a_batch_claim_walks_the_bands_most_urgent_first(queue: Queue) -> None:
    await queue.enqueue_many(
        [
            Item("d0", lane="d"),
            Item("l0", lane="l", priority=1),
            Item("d1", lane="d"),
            Item("h0", lane="h", priority=7),
            Item("h1", lane="h", priority=7),
            Item("m0", lane="d", priority=6),
        ]
    )
    batch = await queue.claim_batch(10)
    assert isinstance(batch, list)
    assert [job.payload for job in batch] == ["h0", "h1", "m0", "d0", "d1", "l0"]
    assert await queue.ring() == []
    assert (await queue.counts()).ringed == 0


async def test_retries_reaps_and_promotes_keep_a_jobs_priority(queue: Queue) -> None:
    await queue.enqueue_many([Item(f"d{n}", lane="d") for n in range(4)])
    await queue.enqueue("u", lane="u", priority=9)
    job = await queue.claim()
    assert isinstance(job, Job)
    assert job.payload == "u"
    assert await queue.retry(job, delay=0.0, max_attempts=9) == "scheduled"
    job = await queue.claim(lease=0.001)  # back in its lane at once, still first
    assert isinstance(job, Job)
    assert job.payload == "u"
    await asyncio.sleep(0.01)  # the lease runs out on the server clock
    assert (await queue.reap()).recovered == [job.id]
    job = await queue.claim()
    assert isinstance(job, Job)
    assert job.payload == "u"
    assert await queue.retry(job, delay=0.02, max_attempts=9) == "scheduled"
    await asyncio.sleep(0.03)
    assert await queue.promote() == 1
    assert await claims(queue, 2) == ["u", "d0"]
    # A job scheduled at admission keeps its priority too.
    await queue.enqueue_in(0.02, "later", lane="d", priority=9)
    await asyncio.sleep(0.03)
    assert await queue.promote() == 1
    assert await claims(queue, 2) == ["later", "d1"]


async def test_bad_priorities_are_refused_before_any_write(queue: Queue) -> None:
    for bad in (10, -1, True, 5.0, "9"):
        with pytest.raises(InvalidArgument) as refused:
            await queue.enqueue("x", priority=bad)  # type: ignore[arg-type]
        assert refused.value.argument == "priority"
    verdicts = await queue.enqueue_many([Item("ok"), Item("no", priority=11)])
    assert [v.kind for v in verdicts] == ["enqueued", "error"]
    assert (await queue.counts()).pending == 1


async def test_the_task_option_and_using_set_the_band(valkey_url: str, queue_name: str) -> None:
    app = App(valkey_url, queue=queue_name)
    await app.connect()
    try:

        @app.task(priority=8)
        async def urgent(n: int) -> None: ...

        @app.task
        async def normal(n: int) -> None: ...

        with pytest.raises(InvalidArgument) as refused:

            @app.task(priority=12)
            async def wrong(n: int) -> None: ...

        assert refused.value.argument == "priority"
        with pytest.raises(InvalidArgument):
            normal.using(priority=-1)
        await normal.enqueue(1)
        await normal.using(priority=0).enqueue(2)
        await urgent.enqueue(3)
        await normal.using(priority=9).enqueue(4)
        served = await claims(app.queue(), 4)
        assert [job["args"]["n"] for job in served] == [4, 3, 1, 2]
    finally:
        queue = app.queue()
        await queue.pause()
        await queue.obliterate(force=True)
        await app.close()


async def test_the_blocking_producer_carries_priority(queue: Queue, valkey_url: str) -> None:
    with connect_sync_queue(valkey_url, queue.name) as sync:  # sharded: its shards
        sync.enqueue("low", priority=1)
        sync.enqueue("high", priority=9)
        with pytest.raises(InvalidArgument):
            sync.enqueue("bad", priority=10)
    assert await claims(queue, 2) == ["high", "low"]

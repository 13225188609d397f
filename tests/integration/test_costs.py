"""Cost-weighted budgets (issue 26 part 2): a job spends ``cost`` units; lane and queue rates
count units, and so does a lane's ceiling; a claim, one or a batch, never overshoots a budget;
a job dearer than a whole budget passes alone when that budget is untouched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from echomq import App, InvalidArgument, Queue
from echomq.engine.options import JobOptions
from echomq.engine.results import Empty, Job, RateLimited
from echomq.engine.sharded import ShardedQueue
from echomq.engine.sharded_sync import ShardedSyncQueue
from echomq.engine.sync_queue import SyncQueue
from echomq.testing import discard


@pytest.fixture
async def queue(valkey_url: str, queue_name: str, queue_kind: str) -> AsyncIterator[Queue]:
    # ALSO_SHARDED (tests/conftest.py): 3 shards, their loads read at every claim.
    sharded = {"shards": 3, "refresh": 0.0} if queue_kind == "sharded" else {}
    opener = ShardedQueue.connect if sharded else Queue.connect
    q = await opener(valkey_url, queue_name, pool_size=1, events=False, **sharded)
    yield q
    await discard(q)


async def admit(queue: Queue, lane: str, *costs: int) -> None:
    """One job per cost in ``lane``, its payload ``<lane><i>:<cost>``."""
    for i, cost in enumerate(costs):
        await queue.admit(f"{lane}{i}:{cost}", JobOptions(lane=lane, cost=cost))


async def claimed(queue: Queue, lease: float = 30.0) -> Job:
    job = await queue.claim(lease)
    assert isinstance(job, Job), job
    return job


@pytest.mark.one_slot("the order across lanes a and b is one ring's")
@pytest.mark.parametrize("mode", ["fixed", "smooth"])
async def test_a_cost_5_job_spends_a_10_unit_rate_in_two_claims(queue: Queue, mode: Any) -> None:
    await queue.lane("a").rate(10, 60, mode=mode)
    await admit(queue, "a", 5, 5, 5)
    await admit(queue, "b", 1)
    assert (await claimed(queue)).payload == "a0:5"
    assert (await claimed(queue)).payload == "b0:1"  # a's turn rotates as before
    assert (await claimed(queue)).payload == "a1:5"
    waiting = await queue.claim()  # a's 10 units are spent: a2 waits for the window
    assert isinstance(waiting, Empty)
    assert waiting.retry_in is not None
    assert 55 < waiting.retry_in <= 60


async def test_a_head_short_of_room_waits_until_its_units_return(queue: Queue) -> None:
    await queue.lane("a").rate(10, 60, mode="fixed")
    await admit(queue, "a", 8, 3, 1)
    assert (await claimed(queue)).payload == "a0:8"
    # 2 units are left: a1 (3) does not fit, and a2 (1) does not jump the lane's order.
    waiting = await queue.claim()
    assert isinstance(waiting, Empty)
    assert waiting.retry_in is not None
    assert waiting.retry_in > 55
    assert await queue.ring() == []  # benched until the window ends, not spinning


async def test_a_batch_claim_stops_at_the_budget(queue: Queue) -> None:
    await queue.lane("a").rate(10, 60, mode="smooth")
    await admit(queue, "a", 4, 4, 4, 1)
    batch = await queue.claim_batch(10)
    assert isinstance(batch, list)
    assert [job.payload for job in batch] == ["a0:4", "a1:4"]
    assert isinstance(await queue.claim(), Empty)
    one_lane = await queue.claim_batch(10, one_lane=True)
    assert isinstance(one_lane, Empty)


async def test_a_unit_ceiling_lets_a_cost_3_job_share_4_slots_with_one_cost_1_job(
    queue: Queue,
) -> None:
    # --8<-- [start:ceiling]
    await queue.lane("a").limit(4)  # 4 units in flight at most
    await queue.admit("render", JobOptions(lane="a", cost=3))  # takes 3 of them
    for payload, cost in (("thumb", 1), ("thumb", 1), ("crop", 2)):
        await queue.admit(payload, JobOptions(lane="a", cost=cost))
    # --8<-- [end:ceiling]
    big = await claimed(queue)
    assert big.payload == "render"
    assert (await claimed(queue)).payload == "thumb"
    assert isinstance(await queue.claim(), Empty)  # 4 of 4 units in flight
    assert await queue.ring() == []
    assert await queue.complete(big)
    # 3 units free again: the thumb (1) and the crop (2) fit; a batch takes both, no more.
    batch = await queue.claim_batch(10)
    assert isinstance(batch, list)
    assert [job.payload for job in batch] == ["thumb", "crop"]
    assert isinstance(await queue.claim(), Empty)


async def test_a_job_dearer_than_the_whole_budget_passes_alone(queue: Queue) -> None:
    await queue.lane("a").limit(2)
    await admit(queue, "a", 5, 1)
    big = await claimed(queue)  # nothing in flight: it passes alone
    assert big.payload == "a0:5"
    assert isinstance(await queue.claim(), Empty)
    assert await queue.complete(big)
    assert (await claimed(queue)).payload == "a1:1"
    await queue.lane("r").rate(3, 60, mode="fixed")
    await admit(queue, "r", 7, 1)
    assert (await claimed(queue)).payload == "r0:7"  # an untouched window: it passes alone
    assert isinstance(await queue.claim(), Empty)


@pytest.mark.one_slot("a queue-wide rate on shards comes with quotas")
@pytest.mark.parametrize("mode", ["fixed", "smooth"])
async def test_a_queue_wide_rate_counts_units(queue: Queue, mode: Any) -> None:
    await queue.rate_limit(6, 60, mode=mode)
    await admit(queue, "a", 4)
    await admit(queue, "b", 4)
    await admit(queue, "c", 2)
    assert (await claimed(queue)).payload == "a0:4"
    # 2 units left: b's head (4) waits for the window, and the walk stops at it.
    limited = await queue.claim()
    assert isinstance(limited, RateLimited)
    assert 55 < limited.wait <= 60


async def test_costs_survive_retry_defer_reap_and_promote(queue: Queue) -> None:
    await queue.lane("a").limit(2)
    await admit(queue, "a", 2, 1)

    async def holds_the_lane() -> Job:
        job = await claimed(queue, lease=30.0)
        assert job.payload == "a0:2"
        assert isinstance(await queue.claim(), Empty)  # both units are its
        return job

    job = await holds_the_lane()
    assert await queue.retry(job, delay=0.0, max_attempts=9) == "scheduled"
    job = await holds_the_lane()
    assert await queue.retry(job, delay=0.02, max_attempts=9) == "scheduled"
    await asyncio.sleep(0.03)
    assert await queue.promote() == 1
    job = await holds_the_lane()
    assert await queue.delay(job, delay=0.02)
    await asyncio.sleep(0.03)
    assert await queue.promote() == 1
    job = await holds_the_lane()
    assert await queue.retry(job, delay=0.0, max_attempts=9) == "scheduled"
    job = await claimed(queue, lease=0.001)
    assert job.payload == "a0:2"
    await asyncio.sleep(0.01)  # the lease runs out on the server clock
    assert (await queue.reap()).recovered == [job.id]  # its units are released
    job = await holds_the_lane()
    assert await queue.complete(job)
    assert (await claimed(queue)).payload == "a1:1"
    assert await queue.wire.call("HGETALL", queue.keys.gextra) in ([], {})


@pytest.mark.one_slot("reads the job rows of shard 0")
async def test_bad_costs_are_refused_before_any_write(queue: Queue) -> None:
    for bad in (0, 1001, -1, True, 2.0, "3"):
        with pytest.raises(InvalidArgument) as refused:
            await queue.admit("x", JobOptions(cost=bad))  # type: ignore[arg-type]
        assert refused.value.argument == "cost"
        with pytest.raises(InvalidArgument) as refused:
            await queue.enqueue("x", cost=bad)  # type: ignore[arg-type]
        assert refused.value.argument == "cost"
    assert (await queue.counts()).pending == 0
    assert not await queue.wire.call("HEXISTS", queue.keys.meta, "costed")
    verdicts = await queue.admit_many([("ok", JobOptions(cost=2)), ("no", JobOptions(cost=0))])
    assert [v.kind for v in verdicts] == ["enqueued", "error"]
    assert await queue.wire.call("HGET", queue.keys.job(verdicts[0].id), "cost") == b"2"


async def test_the_blocking_producer_carries_the_cost(queue: Queue, valkey_url: str) -> None:
    if isinstance(queue, ShardedQueue):
        opened = ShardedSyncQueue.connect(valkey_url, queue.name, shards=len(queue.shards))
    else:
        opened = SyncQueue.connect(valkey_url, queue.name)
    with opened as sync:
        sync.admit("heavy", JobOptions(cost=7))
        sync.admit("light", JobOptions())
        with pytest.raises(InvalidArgument):
            sync.admit("bad", JobOptions(cost=1001))
    await queue.lane("_").limit(7)
    assert (await claimed(queue)).payload == "heavy"
    assert isinstance(await queue.claim(), Empty)  # 7 of 7 units in flight


async def test_the_task_option_and_using_set_the_cost(valkey_url: str, queue_name: str) -> None:
    app = App(valkey_url, queue=queue_name)
    await app.connect()
    queue = app.queue()
    try:

        @app.task(cost=3, lane="tenant")
        async def heavy(n: int, tenant: str) -> None: ...

        with pytest.raises(InvalidArgument) as refused:

            @app.task(cost=0)
            async def wrong(n: int) -> None: ...

        assert refused.value.argument == "cost"
        with pytest.raises(InvalidArgument) as refused:
            heavy.using(cost=1001)
        assert refused.value.argument == "cost"
        await queue.lane("t").limit(4)
        await heavy.enqueue(1, "t")
        await heavy.using(cost=2).enqueue(2, "t")
        await heavy.using(cost=1).enqueue(3, "t")
        first = await claimed(queue)
        assert first.payload["args"]["n"] == 1
        assert isinstance(await queue.claim(), Empty)  # 3 + 2 > 4
        assert await queue.complete(first)
        batch = await queue.claim_batch(5)
        assert isinstance(batch, list)
        assert [job.payload["args"]["n"] for job in batch] == [2, 3]
    finally:
        await queue.pause()
        await queue.obliterate(force=True)
        await app.close()

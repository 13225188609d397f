"""Queue-wide gates on a sharded queue (docs/concepts/shards.md, "Queue-wide gates across
shards"), three shards on one server: a shard's quota is its queue-level gate and a quota of 0
refuses its claims (meta ``noquota``); quota.lua lowers a shard by at most its unused room and
refuses a stale fencing token by name; and under skewed demand, with the rebalancer the
workers' upkeep runs, no window of T holds more than M claims and never more than C jobs are
leased over all shards (the budget's use is printed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from echomq import Item, Job
from echomq.consumers.consumer import Consumer, ConsumerOptions
from echomq.engine import Empty, RateLimited, ShardedQueue
from echomq.errors import InvalidArgument, StaleTokenError
from echomq.testing import discard, lanes_on, most_in_window


@pytest.fixture
async def sharded(valkey_url: str, queue_name: str) -> AsyncIterator[ShardedQueue]:
    queue = await ShardedQueue.connect(valkey_url, queue_name, shards=3, pool_size=4)
    yield queue
    await queue.rebalancer.stop()
    await discard(queue)


async def meta(queue: ShardedQueue, k: int, *names: str) -> list[bytes | None]:
    shard = queue.shards[k]
    return list(await shard.wire.call("HMGET", shard.keys.meta, *names))


async def test_a_shard_with_no_quota_is_refused_claims(sharded: ShardedQueue) -> None:
    lane = lanes_on(sharded.placement_map, [0, 1, 0])[1][0]
    await sharded.enqueue_many([Item({"n": i}, lane=lane) for i in range(2)])
    shard = sharded.shards[1]
    # A quota of 0 is not "no limit": the shard answers like a pause.
    assert await shard.engine.quota("set", 1, "concurrency", "0") == 0
    assert await meta(sharded, 1, "concurrency", "noquota") == [None, b"c"]
    assert isinstance(await type(shard).claim_some(shard, 1), Empty)
    assert isinstance(await sharded.claim_some(1), Empty)
    assert await shard.engine.quota("take", 1, "concurrency", 1) == 1
    assert await meta(sharded, 1, "concurrency", "noquota") == [b"1", None]
    claimed = await sharded.claim_some(2)
    assert isinstance(claimed, tuple)
    assert len(claimed[0]) == 1


async def test_give_frees_at_most_the_unused_room_and_take_raises(sharded: ShardedQueue) -> None:
    lane = lanes_on(sharded.placement_map, [0, 0, 1])[2][0]
    await sharded.enqueue_many([Item({"n": i}, lane=lane) for i in range(6)])
    shard = sharded.shards[2]
    await shard.engine.quota("set", 1, "concurrency", "3")
    await shard.engine.quota("set", 1, "rate", "5", 60_000, "smooth")
    claimed = await sharded.claim_some(2)
    assert isinstance(claimed, tuple)
    assert len(claimed[0]) == 2
    # Concurrency: 3 - 2 leased = 1 of room; rate: 5 - 2 claims in the window = 3.
    assert await shard.engine.quota("give", 1, "concurrency", 3) == [1, 2]
    assert await shard.engine.quota("give", 1, "rate", 10) == [3, 2]
    assert await shard.engine.quota("give", 1, "concurrency", 1) == [0, 2]
    assert isinstance(await sharded.claim_some(1), Empty)
    await sharded.complete(claimed[0][0])
    assert await shard.engine.quota("give", 1, "concurrency", 5) == [1, 1]
    assert await shard.engine.quota("take", 1, "rate", 4) == 6
    c, active, r, used, _, _ = await shard.engine.quota("read")
    assert (c, active, r, used) == (1, 1, 6, 2)
    assert await meta(sharded, 2, "concurrency", "max", "window", "mode") == [
        b"1",
        b"6",
        b"60000",
        b"smooth",
    ]
    # A fixed window's room is its count's: 4 - 2 claimed in it = 2 freed.
    other = lanes_on(sharded.placement_map, [0, 1, 0])[1][0]
    await sharded.enqueue_many([Item({"n": i}, lane=other) for i in range(3)])
    fixed = sharded.shards[1]
    await fixed.engine.quota("set", 1, "rate", "4", 60_000, "")
    claimed = await type(fixed).claim_some(fixed, 2)
    assert isinstance(claimed, tuple)
    assert len(claimed[0]) == 2
    assert await fixed.engine.quota("give", 1, "rate", 9) == [2, 2]
    assert isinstance(await type(fixed).claim_some(fixed, 1), RateLimited)  # its window spent
    with pytest.raises(Exception, match="EMQARG gate"):
        await shard.engine.quota("give", 1, "ceiling", 1)


async def test_a_stale_fencing_token_is_refused_by_name(sharded: ShardedQueue) -> None:
    first, second = sharded.shards[0], sharded.shards[1]
    owner = await first.engine.quota("hold", "a", 2000, "")
    assert owner >= 1
    assert await first.engine.quota("hold", "b", 2000, "") == 0  # held by a
    assert await first.engine.quota("hold", "a", 2000, "") == owner  # renewed, same token
    taken = await first.engine.quota("hold", "b", 2000, "1")
    assert taken == owner + 1
    await second.engine.quota("set", taken, "concurrency", "4")
    with pytest.raises(StaleTokenError, match=f"quota token {owner}: .* moved on to {taken}"):
        await second.engine.quota("take", owner, "concurrency", 4)
    assert (await second.engine.quota("read"))[0] == 4  # nothing written
    assert await first.engine.quota("release", "a") == 0
    assert await first.engine.quota("release", "b") == 1
    assert await first.engine.quota("hold", "a", 2000, "") == taken + 1


async def test_the_budgets_are_checked_and_split_with_nothing_over_them(
    sharded: ShardedQueue,
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        await sharded.concurrency(0)
    assert refused.value.argument == "ceiling"
    with pytest.raises(InvalidArgument) as refused:
        await sharded.rate_limit(20_000, 1.0, mode="smooth")
    assert refused.value.argument == "max"
    assert await sharded.concurrency(7)
    assert not await sharded.concurrency(7)
    quotas = [(await s.engine.quota("read"))[0] for s in sharded.shards]
    assert sum(quotas) == 7
    assert min(quotas) >= 2
    assert await sharded.rate_limit(10, 1.0)
    rates = [(await s.engine.quota("read"))[2] for s in sharded.shards]
    assert sum(rates) == 10
    assert await sharded.concurrency(None)
    assert [(await s.engine.quota("read"))[0] for s in sharded.shards] == [-1, -1, -1]
    assert await meta(sharded, 0, "concurrency", "noquota") == [None, None]


@dataclass
class Run:
    """What the workers saw: each claim's server ms and shard, and the most leased at once
    (sampled)."""

    claims: list[int] = field(default_factory=list)
    shards: list[int] = field(default_factory=list)
    most_leased: int = 0
    leased_samples: list[int] = field(default_factory=list)


LEASE_MS = 30_000


async def drive(queue: ShardedQueue, run: Run, workers: int, hold: float, until: float) -> None:
    """``workers`` claim loops (one job a claim, held ``hold`` s, then completed) and a sampler
    of the jobs leased over every shard (one script: the three counts at one instant)."""
    loop = asyncio.get_running_loop()
    sample = "return redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2]) + " + (
        "redis.call('ZCARD', KEYS[3])"
    )
    actives = [shard.keys.active for shard in queue.shards]

    async def worker() -> None:
        while loop.time() < until:
            got = await queue.claim_some(1, LEASE_MS / 1000)
            if not isinstance(got, tuple):
                hint = got.retry_in if isinstance(got, Empty) else got.wait
                await asyncio.sleep(min(hint or 0.005, 0.02))
                continue
            for job in got[0]:
                run.claims.append(job.deadline_ms - LEASE_MS)
                run.shards.append(job.shard)
                await asyncio.sleep(hold)
                await queue.complete(job)

    async def sampler() -> None:
        while loop.time() < until:
            leased = int(await queue.wire.call("EVAL", sample, 3, *actives))
            run.leased_samples.append(leased)
            run.most_leased = max(run.most_leased, leased)
            await asyncio.sleep(0.002)

    await asyncio.gather(sampler(), *(worker() for _ in range(workers)))


async def skewed(queue: ShardedQueue) -> None:
    """Most lanes (and jobs) on shard 0, one lane on each other shard."""
    lanes = lanes_on(queue.placement_map, [6, 1, 1], prefix="s")
    items = [Item({"n": i}, lane=lanes[0][i % 6]) for i in range(400)]
    items += [Item({"n": i}, lane=lanes[k][0]) for k in (1, 2) for i in range(60)]
    await queue.enqueue_many(items)


async def test_a_queue_wide_smooth_rate_holds_over_shards_under_skewed_demand(
    sharded: ShardedQueue,
) -> None:
    budget, window_ms, seconds = 20, 500, 3.0
    await skewed(sharded)
    assert await sharded.rate_limit(budget, window_ms / 1000, mode="smooth")
    await sharded.upkeep()  # the workers' upkeep starts the rebalancer
    run = Run()
    loop = asyncio.get_running_loop()
    await drive(sharded, run, workers=6, hold=0.001, until=loop.time() + seconds)
    worst = most_in_window(run.claims, window_ms)
    span = max(run.claims) - min(run.claims)
    used = len(run.claims) / (budget * (span // window_ms + 1))  # the most a span admits
    print(f"\nsmooth rate {budget}/{window_ms} ms over 3 shards, skewed: {len(run.claims)} claims")
    print(f"in {span} ms, worst window {worst}, budget used {used:.0%}")
    share = run.shards.count(0) / len(run.shards)
    print(f"shard 0's share {share:.0%} (its weight's: 6 of 8 = 75%)")
    assert worst <= budget  # exact: overshoot 0
    assert sharded.rebalancer.rounds >= 4
    assert used > 0.7  # the budget follows the demand (most of it on shard 0)
    assert abs(share - 0.75) < 0.08  # the budget shared by W_s: the ring's weights hold


async def test_a_queue_wide_ceiling_holds_over_shards_under_skewed_demand(
    sharded: ShardedQueue,
) -> None:
    ceiling, seconds = 4, 2.5
    await skewed(sharded)
    assert await sharded.concurrency(ceiling)
    await sharded.upkeep()
    run = Run()
    loop = asyncio.get_running_loop()
    await drive(sharded, run, workers=8, hold=0.02, until=loop.time() + seconds)
    mean = sum(run.leased_samples) / len(run.leased_samples)
    print(f"\nceiling {ceiling} over 3 shards, skewed: {len(run.claims)} claims, most leased")
    print(f"{run.most_leased}, mean leased {mean:.2f} ({mean / ceiling:.0%} of the budget)")
    assert run.most_leased <= ceiling  # exact, at every sampled instant
    assert run.most_leased == ceiling
    assert len(run.claims) > 100


async def test_a_consumers_upkeep_runs_the_rebalancer_under_a_queue_wide_ceiling(
    sharded: ShardedQueue,
) -> None:
    """A ``Consumer`` wider than the ceiling: its upkeep starts the rounds, its handlers never
    run more than the queue's ceiling at once, and every job runs once."""
    lanes = lanes_on(sharded.placement_map, [3, 1, 1], prefix="c")
    await sharded.enqueue_many(
        Item(i, lane=[lane for part in lanes for lane in part][i % 5]) for i in range(40)
    )
    assert await sharded.concurrency(2)
    running, most, done = 0, 0, asyncio.Event()
    ran: list[int] = []

    async def handler(job: Job) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1
        ran.append(job.payload)
        if len(ran) == 40:
            done.set()

    consumer = Consumer(sharded, handler, ConsumerOptions(beat=0.1, concurrency=6))
    serving = asyncio.ensure_future(consumer.run())
    async with asyncio.timeout(20):
        await done.wait()
    consumer.stop()
    await serving
    assert sorted(ran) == list(range(40))
    assert most <= 2
    assert sharded.rebalancer.rounds > 0


@pytest.mark.parametrize("setter", ["the rounds' own queue", "another queue object"])
async def test_the_quotas_never_sum_past_a_budget_changed_while_rounds_run(
    sharded: ShardedQueue, valkey_url: str, setter: str
) -> None:
    """Budgets set again and again while rounds run, by the queue running them (same owner,
    same token) or by another (it takes the lease over with a newer token): with nothing
    leased every donor has room, so after each call the quotas sum to the budget exactly,
    never to a stale larger one."""
    lanes = lanes_on(sharded.placement_map, [1, 1, 1], prefix="m")
    await sharded.enqueue_many(Item(i, lane=lanes[i % 3][0]) for i in range(30))
    await sharded.concurrency(5)
    sharded.rebalancer.start()
    other = await ShardedQueue.connect(valkey_url, sharded.name, shards=3)
    try:
        await change_budgets(sharded, sharded if setter.startswith("the") else other)
    finally:
        await other.close()


async def change_budgets(sharded: ShardedQueue, setter: ShardedQueue) -> None:
    for budget in (9, 2, 7, 3, 8, 1, 6, 2, 9, 4) * 2:
        await setter.concurrency(budget)
        quotas = [(await s.engine.quota("read"))[0] for s in sharded.shards]
        assert sum(quotas) == budget
        await asyncio.sleep(0.05)  # let a round or none run between two calls
        quotas = [(await s.engine.quota("read"))[0] for s in sharded.shards]
        assert sum(quotas) <= budget


async def concurrency_quotas(queue: ShardedQueue) -> list[int]:
    """Each shard's concurrency quota (-1: unlimited there), read without a fence."""
    return [int((await s.engine.quota("read"))[0]) for s in queue.shards]


async def test_a_process_that_missed_a_grow_tops_up_no_shard_past_the_budget(
    sharded: ShardedQueue,
) -> None:
    """Another process grew the queue and its rounds gave the new shard a share: a round by
    a process that knew three shards counts the fourth's quota too (it takes the grow on)."""
    stale = await ShardedQueue.open(sharded.name, sharded.wire, shards=3)
    assert await sharded.concurrency(4)
    await sharded.add_shards(4)
    for _ in range(3):
        assert await sharded.rebalancer.round()
    assert sum(quotas := await concurrency_quotas(sharded)) == 4
    assert quotas[3] > 0
    await sharded.shards[0].engine.quota("release", sharded.rebalancer.owner)
    for _ in range(3):
        assert await stale.rebalancer.round()
        assert sum(await concurrency_quotas(sharded)) <= 4
    assert len(stale.shards) == 4
    await stale.close()


async def test_a_budget_set_by_a_process_that_missed_a_grow_limits_the_new_shards(
    sharded: ShardedQueue,
) -> None:
    stale = await ShardedQueue.open(sharded.name, sharded.wire, shards=3)
    await sharded.add_shards(4)  # no budget yet: the new shard is unlimited
    assert await stale.concurrency(4)
    quotas = await concurrency_quotas(sharded)
    assert min(quotas) >= 0
    assert sum(quotas) == 4
    await stale.close()


async def test_a_budget_whose_split_stopped_midway_is_finished_by_the_next_round(
    sharded: ShardedQueue,
) -> None:
    """The setter's steps in order, stopped after the directory and two of the three shards
    (as a shard's primary down would stop it): a retry finds the value written and does
    nothing, and the next round starts the unlimited shard at 0 and hands the budget out."""
    first = sharded.shards[0]
    await sharded.wire.call("HSET", sharded.keys.directory, "concurrency", "5")
    token = await first.engine.quota("hold", "setter", 2000, "1")
    for shard in sharded.shards[:2]:
        await shard.engine.quota("set", token, "concurrency", "0", 1, "")
    await first.engine.quota("release", "setter")
    assert await concurrency_quotas(sharded) == [0, 0, -1]
    assert not await sharded.concurrency(5)
    assert await sharded.rebalancer.round()
    quotas = await concurrency_quotas(sharded)
    assert min(quotas) >= 0
    assert sum(quotas) == 5

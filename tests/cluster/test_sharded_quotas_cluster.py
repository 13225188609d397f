"""Queue-wide gates of a sharded queue on the local 3-primary cluster (docs/concepts/shards.md,
"Queue-wide gates across shards"): six shards, two on each primary, a smooth rate and a ceiling
over all of them under skewed demand, the quotas moved by the rebalancer a worker's upkeep
runs. Each claim's time is its shard primary's clock (one host: no skew between them here), so
the windows are checked exactly: overshoot 0."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from echomq import Item
from echomq.engine import Empty, ShardedQueue
from echomq.server import EmbeddedCluster
from echomq.testing import discard, lanes_on, most_in_window

LEASE_MS = 30_000


@pytest.fixture
async def sharded(valkey_cluster: EmbeddedCluster) -> AsyncIterator[ShardedQueue]:
    name = f"qq-{uuid.uuid4().hex[:8]}"
    queue = await ShardedQueue.connect(valkey_cluster.url, name, shards=6, pool_size=4)
    yield queue
    await queue.rebalancer.stop()
    await discard(queue)


async def skewed(queue: ShardedQueue) -> None:
    """Six lanes on shard 0 (300 jobs), one lane on each other shard (40 jobs each)."""
    heavy, *others = lanes_on(queue.placement_map, [6, 1, 1, 1, 1, 1], "s")
    items = [Item(i, lane=heavy[i % 6]) for i in range(300)]
    items += [Item(i, lane=lane) for (lane,) in others for i in range(40)]
    await queue.enqueue_many(items)


async def drive(queue: ShardedQueue, seconds: float, hold: float) -> tuple[list[int], list[int]]:
    """Eight claim loops for ``seconds``; each claim's server ms and the jobs leased at it."""
    loop = asyncio.get_running_loop()
    until, claims, leased_at_claim, leased = loop.time() + seconds, [], [], 0

    async def worker() -> None:
        nonlocal leased
        while loop.time() < until:
            got = await queue.claim_some(1, LEASE_MS / 1000)
            if not isinstance(got, tuple):
                hint = got.retry_in if isinstance(got, Empty) else got.wait
                await asyncio.sleep(min(hint or 0.005, 0.02))  # the gate's own wait: a backoff
                continue
            for job in got[0]:
                leased += 1
                claims.append(job.deadline_ms - LEASE_MS)
                leased_at_claim.append(leased)
                await asyncio.sleep(hold)
                leased -= 1
                await queue.complete(job)

    await asyncio.gather(*(worker() for _ in range(8)))
    return claims, leased_at_claim


async def test_a_queue_wide_smooth_rate_holds_over_six_shards_on_three_primaries(
    sharded: ShardedQueue,
) -> None:
    budget, window_ms = 12, 400
    await skewed(sharded)
    assert await sharded.rate_limit(budget, window_ms / 1000, mode="smooth")
    await sharded.upkeep()  # what a worker's upkeep does: starts the rebalancer's rounds
    claims, _ = await drive(sharded, seconds=2.5, hold=0.001)
    worst = most_in_window(claims, window_ms)
    span = max(claims) - min(claims)
    used = len(claims) / (budget * (span // window_ms + 1))
    print(f"\nsmooth {budget}/{window_ms} ms over 6 shards on 3 primaries: {len(claims)} claims")
    print(f"in {span} ms, worst window {worst}, budget used {used:.0%}")
    assert worst <= budget  # exact: overshoot 0
    assert used > 0.6  # the quotas follow the demand (most of it on shard 0)


async def test_a_queue_wide_ceiling_holds_over_six_shards_on_three_primaries(
    sharded: ShardedQueue,
) -> None:
    ceiling = 5
    await skewed(sharded)
    assert await sharded.concurrency(ceiling)
    await sharded.upkeep()
    claims, leased = await drive(sharded, seconds=2.0, hold=0.02)
    print(f"\nceiling {ceiling} over 6 shards: {len(claims)} claims, most leased {max(leased)}")
    assert max(leased) <= ceiling  # this process holds every lease: counted exactly
    assert max(leased) == ceiling  # and the budget is reached, on shards of two primaries
    assert len(claims) > 50

"""Queue-wide gates on a sharded queue (docs/concepts/shards.md, "Queue-wide gates across
shards"), three shards on one server: a shard's quota is its queue-level gate and a quota of 0
refuses its claims (meta ``noquota``); quota.lua lowers a shard by at most its unused room and
refuses a stale fencing token by name."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from echomq import Item
from echomq.engine import Empty, ShardedQueue, ShardMap
from echomq.errors import StaleTokenError


@pytest.fixture
async def sharded(valkey_url: str, queue_name: str) -> AsyncIterator[ShardedQueue]:
    queue = await ShardedQueue.connect(valkey_url, queue_name, shards=3, pool_size=4)
    yield queue
    await queue.pause()
    await queue.obliterate(force=True)
    await queue.close()


def lanes_on(placement: ShardMap, per_shard: list[int], prefix: str = "q") -> list[list[str]]:
    """``per_shard[k]`` lane names that live on shard k, for each shard."""
    found: list[list[str]] = [[] for _ in per_shard]
    i = 0
    while any(len(found[k]) < want for k, want in enumerate(per_shard)):
        lane = f"{prefix}{i}"
        if len(found[k := placement.shard_of(lane)]) < per_shard[k]:
            found[k].append(lane)
        i += 1
    return found


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

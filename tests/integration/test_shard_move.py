"""Moving one lane between shards of a sharded queue (docs/concepts/shards.md, "Moving a lane"),
on three shards of one queue on one server: a lane frozen on its source (``moved``) or held on
its target (``adopted`` naming its source) is served by neither, as a paused lane is."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from echomq import Item
from echomq.engine import Empty, ShardedQueue, ShardMap


@pytest.fixture
async def sharded(valkey_url: str, queue_name: str) -> AsyncIterator[ShardedQueue]:
    queue = await ShardedQueue.connect(valkey_url, queue_name, shards=3, refresh=0)
    yield queue
    await queue.pause()
    await queue.obliterate(force=True)
    await queue.close()


def lane_on(placement: ShardMap, shard: int, prefix: str = "t") -> str:
    """The first lane name (``t0``, ``t1`` …) that the map places on ``shard``."""
    return next(
        f"{prefix}{i}" for i in range(10_000) if placement.shard_of(f"{prefix}{i}") == shard
    )


async def test_a_lane_frozen_on_its_source_is_not_claimed_there(sharded: ShardedQueue) -> None:
    lane = lane_on(sharded.placement_map, 0)
    source = sharded.shards[0]
    await sharded.enqueue_many(Item(f"j{i}", lane=lane) for i in range(3))
    await source.wire.call("HSET", source.keys.moved, lane, 1)
    # Whatever rings a lane asks serviceable(): a resume (here, of a lane not paused) is one.
    await source.lane(lane).pause()
    await source.lane(lane).resume()
    assert isinstance(await sharded.claim(), Empty)
    assert await source.wire.call("LLEN", source.keys.ring) == 0
    await source.wire.call("HDEL", source.keys.moved, lane)
    await source.lane(lane).resume()
    claimed = await sharded.claim()
    assert not isinstance(claimed, Empty)
    assert claimed.payload == "j0"


async def test_a_lane_held_on_its_target_is_not_claimed_until_released(
    sharded: ShardedQueue,
) -> None:
    lane = lane_on(sharded.placement_map, 0)
    target = sharded.shards[1]
    await target.wire.call("HSET", target.keys.adopted, lane, 0)  # arriving from shard 0: held
    await target.enqueue_many([Item("early", lane=lane), Item("late", lane=lane)])  # admitted
    assert (await target.counts()).pending == 2
    assert isinstance(await sharded.claim(), Empty)
    await target.wire.call("HSET", target.keys.adopted, lane, "")  # released
    await target.lane(lane).resume()
    claimed = await sharded.claim()
    assert not isinstance(claimed, Empty)
    assert claimed.payload == "early"
    assert claimed.shard == 1

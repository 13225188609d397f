"""A sharded queue's keys as Valkey holds them (docs/concepts/shards.md): each shard's ``owns``
bitmap reads back, with the ``GETBIT`` the fence will use, exactly the lane slots the map gives
that shard, and the directory's fields read back as the same ``ShardMap``. On the cluster:
tests/cluster/test_shard_tags_cluster.py."""

from __future__ import annotations

import random

from echomq import Queue
from echomq.engine.keys import SLOTS
from echomq.engine.shards import ShardMap, choose_tags


async def test_each_shards_owns_bitmap_answers_getbit_for_exactly_its_lane_slots(
    queue: Queue,
) -> None:
    tags = choose_tags(queue.name, 3)
    shard_map = ShardMap(tags, ((0, 0), (7, 2), (9, 1), (5000, 0), (9000, 2), (16383, 1)))
    spaces = [shard_map.keyspace(k) for k in range(3)]
    probes = sorted(
        {0, 6, 7, 8, 9, 10, 4999, 5000, 8999, 9000, 16382, 16383, 1 << 13}.union(
            random.Random(30).sample(range(SLOTS), 200)
        )
    )
    try:
        for k, keys in enumerate(spaces):
            await queue.wire.call("SET", keys.owns, shard_map.owns_bitmap(k))
        for k, keys in enumerate(spaces):
            bits = await queue.wire.call_many([("GETBIT", keys.owns, s) for s in probes])
            assert bits == [int(shard_map.owner(s) == k) for s in probes], k
            owned = sum(len(run) for run in shard_map.slots_of(k))
            assert await queue.wire.call("BITCOUNT", keys.owns) == owned
    finally:
        for keys in spaces:
            await queue.wire.call("DEL", keys.owns)


async def test_the_directory_and_overrides_read_back_as_the_same_map(queue: Queue) -> None:
    created = ShardMap.create(queue.name, 4)
    shard_map = ShardMap(created.tags, created.table, (("Zürich 🚀", 3), ("{orders}", 0)), 5)
    keys = shard_map.keyspace(0)
    try:
        await queue.wire.call_many(
            [
                ("HSET", keys.directory, *(x for f in shard_map.to_directory().items() for x in f)),
                ("HSET", keys.placed, *(x for f in shard_map.to_placed().items() for x in f)),
            ]
        )
        directory, placed = await queue.wire.call_many(
            [("HGETALL", keys.directory), ("HGETALL", keys.placed)]
        )
        assert ShardMap.from_stored(directory, placed) == shard_map
        assert ShardMap.from_stored(directory, placed).shard_of("Zürich 🚀") == 3
    finally:
        await queue.wire.call("DEL", keys.directory, keys.placed)

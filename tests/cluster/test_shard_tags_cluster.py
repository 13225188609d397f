"""Tag choice on the local 3-primary cluster, from the router's own slot map: a 6-shard queue's
tags land two on each primary, starting from the primary of the queue's own tag, and each
shard's keys (its ``owns`` bitmap here) are served there (docs/concepts/shards.md)."""

from __future__ import annotations

import uuid
from collections import Counter

from echomq.engine.keys import SLOTS, slot
from echomq.engine.shards import ShardMap
from echomq.wire.cluster import ClusterRouter


async def test_six_shards_spread_two_to_each_of_three_primaries(router: ClusterRouter) -> None:
    owners = [router.owner(s).address for s in range(SLOTS)]
    primaries = sorted(router.nodes)
    assert len(primaries) == 3
    for _ in range(5):
        shard_map = ShardMap.create(f"sh-{uuid.uuid4().hex[:8]}", 6, owners)
        spaces = [shard_map.keyspace(k) for k in range(6)]
        on = [router.owner(slot(keys.root)).address for keys in spaces]
        assert Counter(on) == dict.fromkeys(primaries, 2)
        assert on[0] == router.owner(slot(shard_map.queue)).address
        try:
            for k, keys in enumerate(spaces):
                await router.call("SET", keys.owns, shard_map.owns_bitmap(k))
            for k, keys in enumerate(spaces):
                first = shard_map.slots_of(k)[0].start
                node = router.nodes[on[k]]  # the primary the tag was chosen for holds the key
                assert await node.call("GETBIT", keys.owns, first) == 1
                assert await node.call("GETBIT", keys.owns, (first - 1) % SLOTS) == 0
        finally:
            for keys in spaces:
                await router.call("DEL", keys.owns)

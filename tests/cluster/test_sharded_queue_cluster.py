"""A sharded queue on the local 3-primary cluster: six shards, two on each primary, every
lane's jobs on its shard's primary, and one logical queue drained across all of them with the
lanes' weights kept (docs/concepts/shards.md)."""

from __future__ import annotations

import uuid
from collections import Counter

from echomq import Item, Policy
from echomq.engine import Empty, ShardedQueue
from echomq.engine.keys import slot
from echomq.server import EmbeddedCluster
from echomq.wire.cluster import ClusterRouter


async def test_six_shards_on_three_primaries_serve_one_queue_by_weight(
    valkey_cluster: EmbeddedCluster, router: ClusterRouter
) -> None:
    queue = await ShardedQueue.connect(valkey_cluster.url, f"sq-{uuid.uuid4().hex[:8]}", shards=6)
    try:
        homes = [router.owner(slot(shard.keys.root)).address for shard in queue.shards]
        assert Counter(homes) == dict.fromkeys(sorted(router.nodes), 2)
        placement = queue.placement_map
        lanes = []  # two tenants on each shard
        for i in range(1000):
            lane = f"tenant-{i}"
            if sum(placement.shard_of(t) == placement.shard_of(lane) for t in lanes) < 2:
                lanes.append(lane)
        assert Counter(placement.shard_of(lane) for lane in lanes) == dict.fromkeys(range(6), 2)
        heavy = lanes[0]
        await queue.apply_policies(**{heavy: Policy(weight=3)})
        verdicts = await queue.enqueue_many(Item(i, lane=lane) for lane in lanes for i in range(60))
        assert {v.kind for v in verdicts} == {"enqueued"}
        for verdict, item_lane in zip(
            verdicts, (lane for lane in lanes for _ in range(60)), strict=True
        ):
            shard = queue.shards[placement.shard_of(item_lane)]
            node = router.nodes[homes[shard.shard]]  # the row lives on its shard's primary
            assert await node.call("EXISTS", shard.keys.job(verdict.id)) == 1
        got: Counter[str] = Counter()
        for _ in range(140):  # while every lane is backlogged: shares by weight (W = 14)
            job = await queue.claim()
            assert not isinstance(job, Empty)
            got[job.lane] += 1
            await queue.complete(job)
        assert abs(got[heavy] - 30) <= 1  # ±5% of its share
        assert all(abs(got[lane] - 10) <= 1 for lane in lanes[1:]), got
        drained = 140
        while isinstance(jobs := await queue.claim_batch(16), list):
            assert await queue.complete_each(jobs) == ["completed"] * len(jobs)
            drained += len(jobs)
        assert drained == 720
        counts = await queue.counts()
        assert (counts.pending, counts.active, counts.completed) == (0, 0, 720)
    finally:
        await queue.pause()
        await queue.obliterate(force=True)
        await queue.close()

"""A sharded queue's blocking producer and its events on the local 3-primary cluster: the
``ShardedSyncQueue``'s jobs land on their lanes' shards' primaries (a batch spread over all of
them), and one subscription hears the events of every shard, each channel on its own node."""

from __future__ import annotations

import asyncio
import uuid

from echomq import Item
from echomq.engine import Job, ShardedQueue, ShardedSyncQueue
from echomq.engine.keys import slot
from echomq.server import EmbeddedCluster
from echomq.wire.cluster import ClusterRouter


async def test_a_blocking_producer_and_one_subscription_span_the_primaries(
    valkey_cluster: EmbeddedCluster, router: ClusterRouter
) -> None:
    queue = await ShardedQueue.connect(valkey_cluster.url, f"sp-{uuid.uuid4().hex[:8]}", shards=6)
    try:
        homes = [router.owner(slot(shard.keys.root)).address for shard in queue.shards]
        assert len(set(homes)) == 3
        placement = queue.placement_map
        lanes: dict[int, str] = {}  # a lane on each shard
        for i in range(1000):
            lanes.setdefault(placement.shard_of(f"p{i}"), f"p{i}")
        async with queue.subscribe() as events:
            with ShardedSyncQueue.connect(valkey_cluster.url, queue.name, shards=6) as sync:
                verdicts = sync.enqueue_many(Item(k, lane=lanes[k]) for k in range(6))
                solo = sync.enqueue("solo", lane=lanes[5])
            assert [v.kind for v in verdicts] == ["enqueued"] * 6
            for k, verdict in enumerate([*verdicts, solo]):
                shard = queue.shards[placement.shard_of(lanes[min(k, 5)])]
                node = router.nodes[homes[shard.shard]]  # on its shard's primary
                assert await node.call("EXISTS", shard.keys.job(verdict.id)) == 1
            claimed = 0
            while isinstance(job := await queue.claim(), Job):
                assert await queue.complete(job)
                claimed += 1
            assert claimed == 7
            wanted = {v.id for v in [*verdicts, solo]}
            done: set[str] = set()
            async with asyncio.timeout(10):
                while done != wanted:
                    event = await events.get()
                    if event["event"] == "completed":
                        done.add(event["job"])
    finally:
        await queue.pause()
        await queue.obliterate(force=True)
        await queue.close()

"""A sharded queue on the local 3-primary cluster, beyond one slot's verbs: the
``ShardedSyncQueue``'s jobs land on their lanes' shards' primaries (a batch spread over all of
them), one subscription hears the events of every shard, each channel on its own node, and a
flow's children on other primaries reach their parent through their shards' relays."""

from __future__ import annotations

import asyncio
import uuid

from echomq import Item
from echomq.engine import Flow, Job, ShardedQueue, ShardedSyncQueue
from echomq.engine.keys import slot
from echomq.server import EmbeddedCluster
from echomq.testing import discard
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
        await discard(queue)


async def test_a_flow_across_shards_on_three_primaries_completes(
    valkey_cluster: EmbeddedCluster,
) -> None:
    """The parent on shard 3, a child on each of shards 0, 1 and 2 (each pair of shards on
    another primary): each child's shard relays its result to the parent's primary."""
    queue = await ShardedQueue.connect(valkey_cluster.url, f"sf-{uuid.uuid4().hex[:8]}", shards=6)
    try:
        placement = queue.placement_map
        lane = {}
        for i in range(1000):
            lane.setdefault(placement.shard_of(f"f{i}"), f"f{i}")
        ids = await queue.add_flow(
            Flow("parent", [Flow(k, lane=lane[k]) for k in range(3)], lane=lane[3])
        )
        for _ in range(3):
            job = await queue.claim()
            assert isinstance(job, Job)
            assert await queue.complete(job, result=job.payload * 10)
        assert queue.relay_due
        await queue.upkeep()
        parent = await queue.claim()
        assert isinstance(parent, Job)
        assert (parent.id, parent.shard) == (ids.id, 3)
        assert (await queue.children(parent.id)).ordered() == [0, 10, 20]
    finally:
        await discard(queue)

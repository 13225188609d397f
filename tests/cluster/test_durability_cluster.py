"""The durable mode on a Valkey Cluster: the WAITAOF of a batch goes to the primary that took its
writes, on the same connection, and follows writes a MOVED sends to another node (the answers
of several nodes' waits meet as tests/unit/test_cluster_waits.py holds).

A cluster of its own, with AOF switched on at every node (replicas too: a replica's fsync is
what ``replicas=1`` counts), so the session's cluster keeps running without AOF.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from functools import partial

from echomq import Item, Queue
from echomq.engine import Durability, ShardedQueue, ShardedSyncQueue
from echomq.engine.keys import slot
from echomq.server import EmbeddedCluster
from echomq.server.cluster import admin
from echomq.testing import discard, lanes_on
from echomq.wire.cluster import ClusterRouter
from echomq.wire.url import seeds_from_url

Spread = Callable[[ClusterRouter, int, str], list[str]]
DURABLE = Durability(replicas=1, timeout=3.0)


def waits(cluster: EmbeddedCluster) -> dict[str, int]:
    """WAITAOF calls run so far, per node address."""
    counts = {}
    for node in cluster.nodes:
        info = admin(node.host, node.port, "INFO", "commandstats")
        found = re.search(r"cmdstat_waitaof:calls=(\d+)", info)
        counts[f"{node.host}:{node.port}"] = int(found.group(1)) if found else 0
    return counts


async def aof_everywhere(cluster: EmbeddedCluster) -> None:
    for node in cluster.nodes:
        admin(node.host, node.port, "CONFIG", "SET", "appendfsync", "always")
        admin(node.host, node.port, "CONFIG", "SET", "appendonly", "yes")
    # The first rewrite must end before a wait can be confirmed.
    for node in cluster.nodes:
        while "aof_rewrite_in_progress:0" not in admin(node.host, node.port, "INFO", "persistence"):
            await asyncio.sleep(0.05)


async def test_each_batch_waits_on_the_node_that_took_it(
    own_cluster: EmbeddedCluster, spread: Spread
) -> None:
    await aof_everywhere(own_cluster)
    async with ClusterRouter(seeds_from_url(own_cluster.url)) as router:
        for name in spread(router, 3, "durable"):
            queue = Queue(name, router, durability=DURABLE)
            await queue.enqueue(0)  # loads the script on that node (a NOSCRIPT resend waits too)
            owner = router.owner(slot(queue.keys.root)).address
            before = waits(own_cluster)
            verdicts = await queue.enqueue_many(range(250))
            assert {v.kind for v in verdicts} == {"enqueued"}
            after = waits(own_cluster)
            grew = {address: after[address] - before[address] for address in after}
            assert grew == {address: int(address == owner) for address in grew}
            await discard(queue)

        # A stale map: the batch goes to a node that answers MOVED, and is sent again to the
        # owner; a wait goes with it there (the first node's wait covered nothing of it).
        (name,) = spread(router, 1, "moved")
        queue = Queue(name, router, durability=DURABLE)
        await queue.enqueue(0)
        queue_slot = slot(queue.keys.root)
        owner = router.owner(queue_slot).address
        stale = next(address for address in router.nodes if address != owner)
        router._owners[queue_slot] = stale
        before = waits(own_cluster)
        verdicts = await queue.enqueue_many(range(150))
        assert {v.kind for v in verdicts} == {"enqueued"}
        after = waits(own_cluster)
        assert router.moved > 0
        assert after[owner] - before[owner] == 1
        await discard(queue)

    # A sharded queue of six shards, two on each primary: a batch over every shard waits once
    # on each primary (its two shards' writes share the connection), async and blocking.
    name = f"sharded-{uuid.uuid4().hex[:10]}"
    sharded = await ShardedQueue.connect(own_cluster.url, name, shards=6, durability=DURABLE)
    sync = await asyncio.to_thread(
        ShardedSyncQueue.connect, own_cluster.url, name, shards=6, durability=DURABLE
    )
    try:
        lanes = [lane for part in lanes_on(sharded.placement_map, [1] * 6) for lane in part]
        items = [Item(i, lane=lanes[i % 6]) for i in range(60)]
        await sharded.enqueue_many(items)  # loads the script on every primary
        primaries = {sharded.wire.owner(slot(shard.keys.root)).address for shard in sharded.shards}
        assert len(primaries) == 3
        for send in (sharded.enqueue_many, partial(asyncio.to_thread, sync.enqueue_many)):
            before = waits(own_cluster)
            verdicts = await send(items)
            assert {v.kind for v in verdicts} == {"enqueued"}
            after = waits(own_cluster)
            grew = {address: after[address] - before[address] for address in after}
            assert grew == {address: int(address in primaries) for address in grew}
    finally:
        sync.close()
        await discard(sharded)

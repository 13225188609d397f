"""A primary killed under a running consumer: its replica takes over, the client follows, leased
jobs come back after their leases, and every write the replica acknowledged is still there."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid

from echomq.consumers.consumer import Consumer, ConsumerOptions
from echomq.engine.keys import Keyspace, slot
from echomq.engine.queue import Queue
from echomq.engine.results import Job
from echomq.server.cluster import EmbeddedCluster, admin
from echomq.testing import claim_job
from echomq.wire.cluster import ClusterRouter
from echomq.wire.url import seeds_from_url


def name_on(router: ClusterRouter, port: int) -> str:
    """A fresh queue name whose slot the primary listening on ``port`` owns."""
    while True:
        name = f"fo-{uuid.uuid4().hex[:8]}"
        if router.owner(slot(Keyspace(name).root)).port == port:
            return name


async def until(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.01)


async def test_a_killed_primary_is_replaced_and_nothing_acknowledged_is_lost(
    own_cluster: EmbeddedCluster,
) -> None:
    victim, heir = own_cluster.primaries[0], own_cluster.replicas[0]  # heir replicates victim
    async with ClusterRouter(seeds_from_url(own_cluster.url)) as router:
        queue = Queue(name_on(router, victim.port), router)
        ids = [v.id for v in await queue.enqueue_many(range(20))]
        leased = [await claim_job(queue, lease=1.0) for _ in range(3)]
        # Acknowledged = on the replica: WAIT on the connection that carried the writes.
        assert await router.wait_replicas(queue.keys.root, 1, timeout=5.0) == 1

        handled: set[str] = set()
        block = asyncio.Event()

        async def handler(job: Job) -> None:
            handled.add(job.id)
            if len(handled) == 5:
                await block.wait()  # hold some jobs in hand while the primary dies

        consumer = Consumer(queue, handler, ConsumerOptions(beat=0.2, concurrency=2, lease=1.0))
        running = asyncio.ensure_future(consumer.run())
        await until(lambda: len(handled) >= 5)
        refreshes = router.refreshes

        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        assert admin(heir.host, heir.port, "CLUSTER", "FAILOVER", "TAKEOVER") == "+OK"
        block.set()

        # The client finds the new primary by itself; the consumer carries on there.
        await until(lambda: set(ids) <= handled, timeout=60)
        assert router.owner(slot(queue.keys.root)).port == heir.port
        assert router.refreshes > refreshes
        # A settle in flight at the kill may be lost with its socket: that job stays leased,
        # returns after its lease and runs again (at least once). Wait until all are settled.
        deadline = asyncio.get_running_loop().time() + 30
        while (counts := await queue.counts()).pending + counts.active + counts.scheduled:
            assert asyncio.get_running_loop().time() < deadline, counts
            await asyncio.sleep(0.05)
        consumer.stop()
        await running

        # The jobs leased before the kill were on the replica: they came back after their
        # leases (the consumer's upkeep reaped them) and were handled like the rest.
        assert {job.id for job in leased} <= handled
        assert (counts.dead, counts.completed) == (0, len(ids))
        await queue.pause()
        await queue.obliterate(force=True)

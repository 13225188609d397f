"""A live slot migration under load: producers and consumers keep working while a queue's slot
moves from one primary to another; nothing is lost and nothing completes twice."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import Counter

import pytest

from echomq.consumers.consumer import Consumer, ConsumerOptions
from echomq.engine.keys import Keyspace, slot
from echomq.engine.queue import Queue
from echomq.engine.results import Job
from echomq.server.cluster import EmbeddedCluster, migrate_slot
from echomq.wire.cluster import ClusterRouter
from echomq.wire.connector import Connector
from echomq.wire.url import seeds_from_url

PER_QUEUE = 300


def same_slot_name(name: str) -> str:
    """Another queue name whose keys hash to the same slot as ``name``'s."""
    wanted = slot(Keyspace(name).root)
    for i in itertools.count():
        other = f"{name}-{i}"
        if slot(Keyspace(other).root) == wanted:
            return other
    raise AssertionError("unreachable")


async def until(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Poll a condition nothing signals (another task's progress), with a deadline."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("per_queue", [True, False], ids=["queue-by-queue", "plain-reshard"])
async def test_live_migration_under_load_loses_nothing_and_completes_nothing_twice(
    own_cluster: EmbeddedCluster, per_queue: bool
) -> None:
    async with ClusterRouter(seeds_from_url(own_cluster.url)) as router:
        first = f"mig-{uuid.uuid4().hex[:8]}"
        names = sorted([first, same_slot_name(first)])  # two queues: two MIGRATE batches
        queue_slot = slot(Keyspace(first).root)
        source = router.owner(queue_slot)
        target = next(n.options for a, n in router.nodes.items() if a != source.address)
        queues = [Queue(name, router) for name in names]

        handled: Counter[tuple[str, str]] = Counter()

        async def handler(job: Job) -> None:
            handled[job.queue, job.id] += 1

        consumers = [
            Consumer(q, handler, ConsumerOptions(beat=0.2, concurrency=4), name=f"c{i}")
            for i, q in enumerate(queues * 2)
        ]
        running = [asyncio.ensure_future(c.run()) for c in consumers]
        enqueued: list[tuple[str, str]] = []  # (queue, job id): ids are unique per queue

        async def produce(queue: Queue) -> None:
            for i in range(PER_QUEUE):
                verdict = await queue.enqueue(i)
                assert verdict.kind == "enqueued", verdict
                enqueued.append((queue.name, verdict.id))
                if i % 5 == 0:
                    await asyncio.sleep(0.002)  # spread the load over the whole migration

        async def served_by_ask(queue: str) -> None:
            # Keys are on the target while the slot still belongs to the source: the clients'
            # next calls meet ASK (and, for a queue not thawed yet, TRYAGAIN behind it).
            seen = router.ask
            await until(lambda: router.ask > seen, timeout=10)

        # A second client, idle through the migration: its map is stale, so it meets MOVED.
        stale = await ClusterRouter(seeds_from_url(own_cluster.url)).connect()
        events = queues[0].subscribe()  # a sharded subscriber on the slot's node
        await events.__aenter__()
        generation = events.generation
        producers = [asyncio.ensure_future(produce(q)) for q in queues]
        await until(lambda: len(enqueued) >= PER_QUEUE // 2)
        primaries = tuple(n.options for n in router.nodes.values())
        moved = await migrate_slot(
            source,
            target,
            queue_slot,
            others=primaries,
            after_batch=served_by_ask,
            per_queue=per_queue,
        )
        assert moved == names
        await asyncio.gather(*producers)
        await until(lambda: sum(handled.values()) >= len(enqueued))
        for consumer in consumers:
            consumer.stop()
        await asyncio.gather(*running)

        assert len(enqueued) == len(set(enqueued)) == 2 * PER_QUEUE
        assert set(handled) == set(enqueued)
        assert set(handled.values()) == {1}  # nothing handled twice
        for queue in queues:
            counts = await queue.counts()
            assert (counts.pending, counts.active, counts.scheduled, counts.dead) == (0, 0, 0, 0)
            assert counts.completed == PER_QUEUE
        assert router.ask > 0
        assert (await Queue(names[0], stale).counts()).completed == PER_QUEUE
        assert stale.moved > 0
        await stale.close()
        assert router.owner(queue_slot).address == target.address
        # The server let the subscriber go with the slot; it followed the slot to the target.
        await events.wait_subscribed(after=generation, timeout=10)
        assert events.connector.address == target.address
        later = await queues[0].enqueue("after the move")

        async def heard_of_later() -> None:
            while (await events.get())["job"] != later.id:
                pass  # events from before and during the move

        await asyncio.wait_for(heard_of_later(), 5)
        await events.__aexit__(None, None, None)
        async with Connector(source, version_fence=None) as old:
            assert await old.call("CLUSTER", "COUNTKEYSINSLOT", queue_slot) == 0
        for queue in queues:
            await queue.pause()
            await queue.obliterate(force=True)

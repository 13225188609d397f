"""Results, dedup and waits on a real cluster: the scripts' ``SPUBLISH`` on the ``done`` shard
channel is single-slot legal, and a wait's subscription sits on the node owning the queue."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from echomq import Queue
from echomq.engine import Completed
from echomq.engine.keys import slot
from echomq.testing import claim_job, discard
from echomq.wire.cluster import ClusterRouter
from echomq.wire.connector import Connector

Spread = Callable[[ClusterRouter, int, str], list[str]]


async def test_results_and_waits_on_every_shard(router: ClusterRouter, spread: Spread) -> None:
    queues = [Queue(name, router, result_ttl=60) for name in spread(router, 3, "results")]

    async def work(queue: Queue) -> None:
        ids = [v.id for v in await queue.enqueue_many(range(20))]
        waits = [asyncio.ensure_future(queue.wait(i, timeout=20)) for i in ids]
        jobs = await queue.claim_batch(20)
        assert isinstance(jobs, list)
        assert (
            await queue.complete_each([Completed(j, j.payload + 100) for j in jobs])
            == ["completed"] * 20
        )
        infos = await asyncio.gather(*waits)
        assert [i.result for i in infos if i is not None] == [n + 100 for n in range(20)]
        # The subscription is on the primary owning the queue's slot.
        subscription = queue._waiters.subscription
        assert subscription is not None
        owner = router.owner(slot(queue.keys.root)).address
        assert subscription.connector.address == owner

    try:
        await asyncio.gather(*(work(q) for q in queues))
    finally:
        for queue in queues:
            await discard(queue)


async def test_a_dedup_key_outlives_completion_on_a_cluster(router: ClusterRouter) -> None:
    queue = Queue(f"results-dedup-{uuid.uuid4().hex[:8]}", router, result_ttl=60)
    try:
        first = await queue.enqueue("a", dedup_key="once")
        await queue.complete(await claim_job(queue), result="kept")
        again = await queue.enqueue("b", dedup_key="once")
        assert (again.kind, again.id) == ("duplicate", first.id)
        info = await queue.job(first.id)
        assert info is not None
        assert (info.state, info.result) == ("completed", "kept")
        assert 0 < await queue.wire.call("PTTL", queue.keys.dedup("once")) <= 60_000
    finally:
        await discard(queue)


async def test_a_wait_survives_client_kill_on_a_cluster(router: ClusterRouter) -> None:
    queue = Queue(f"results-kill-{uuid.uuid4().hex[:8]}", router, result_ttl=60)
    try:
        verdict = await queue.enqueue("x")
        job = await claim_job(queue)
        waiting = asyncio.ensure_future(queue.wait(verdict.id, timeout=20))
        while queue._waiters.subscription is None or queue._waiters.waits == 0:
            await asyncio.sleep(0.001)
        subscription = queue._waiters.subscription
        client_id = await subscription.connector.call("CLIENT", "ID")
        async with Connector(subscription.connector.options, version_fence=None) as admin:
            assert await admin.call("CLIENT", "KILL", "ID", client_id) == 1
        await queue.retry(job, max_attempts=1, error="E: gone while down")
        info = await asyncio.wait_for(waiting, 15)
        assert info is not None
        assert (info.state, info.last_error) == ("dead", "E: gone while down")
    finally:
        await discard(queue)


async def test_a_wait_follows_a_moved_answer_to_its_ssubscribe(router: ClusterRouter) -> None:
    # A stale map: the router believes another primary owns the queue's slot, so the waiter's
    # SSUBSCRIBE goes there and is answered MOVED; it re-reads the map and subscribes where
    # the slot lives.
    queue = Queue(f"results-moved-{uuid.uuid4().hex[:8]}", router, result_ttl=60)
    try:
        verdict = await queue.enqueue("x")
        await queue.complete(await claim_job(queue), result="found")
        key_slot = slot(queue.keys.root)
        owner = router.owner(key_slot).address
        router._owners[key_slot] = next(a for a in router.nodes if a != owner)
        info = await asyncio.wait_for(queue.wait(verdict.id, timeout=10), 15)
        assert info is not None
        assert info.result == "found"
        subscription = queue._waiters.subscription
        assert subscription is not None
        assert subscription.connector.address == owner
    finally:
        await discard(queue)


async def test_waits_end_when_remove_drain_or_obliterate_delete_their_rows_on_a_cluster(
    router: ClusterRouter, spread: Spread
) -> None:
    # remove and a small drain announce each id, a drain of many rows and obliterate the one
    # wildcard `*`: each is an SPUBLISH on the queue's slot, legal inside the script.
    queues = [Queue(name, router, result_ttl=60) for name in spread(router, 3, "results-gone")]

    async def gone(queue: Queue) -> None:
        removed = await queue.enqueue("x")
        waiting = asyncio.ensure_future(queue.wait(removed.id))
        while queue._waiters.subscription is None or queue._waiters.waits == 0:
            await asyncio.sleep(0.001)
        assert await queue.remove(removed.id)
        assert await asyncio.wait_for(waiting, 10) is None
        for count in (3, 150):
            ids = [v.id for v in await queue.enqueue_many(range(count))]
            waits = [asyncio.ensure_future(queue.wait(i)) for i in ids]
            while queue._waiters.waits < count:
                await asyncio.sleep(0.001)
            assert await queue.drain() == count
            assert await asyncio.wait_for(asyncio.gather(*waits), 10) == [None] * count
        last = await queue.enqueue("y")
        waiting = asyncio.ensure_future(queue.wait(last.id))
        while queue._waiters.waits == 0:
            await asyncio.sleep(0.001)
        await queue.pause()
        await queue.obliterate()
        assert await asyncio.wait_for(waiting, 10) is None

    try:
        await asyncio.gather(*(gone(q) for q in queues))
    finally:
        for queue in queues:
            await discard(queue)

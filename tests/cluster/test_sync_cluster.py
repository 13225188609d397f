"""The blocking producer on a real cluster: each queue's calls reach the primary that owns its
slot (learnt from MOVED when only one seed is named), results are waited on there, and a slot
that migrates while the producer works is followed through ASK and MOVED, losing nothing. Events
and the done channel's wildcard ride each queue's own node; a wait outlives a failover."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable

import pytest
from test_failover import name_on

from echomq import Queue, SyncQueue, WireError
from echomq.engine.keys import slot
from echomq.server import EmbeddedCluster
from echomq.server.cluster import admin, migrate_slot
from echomq.testing import claim_job, discard
from echomq.wire.cluster import ClusterRouter
from echomq.wire.url import seeds_from_url

Spread = Callable[[ClusterRouter, int, str], list[str]]


@pytest.mark.parametrize("seeds", ["every primary", "one seed"])
async def test_queues_on_every_shard_admit_read_and_configure_on_their_own_node(
    router: ClusterRouter, spread: Spread, valkey_cluster: EmbeddedCluster, seeds: str
) -> None:
    url = valkey_cluster.url
    if seeds == "one seed":
        first = valkey_cluster.primaries[0]
        url = f"valkey://{first.host}:{first.port}/0"
    for name in spread(router, 3, "sync"):
        queue = Queue(name, router)
        with SyncQueue.connect(url, name) as sq:
            single = [sq.enqueue(i, lane="g") for i in range(20)]
            many = sq.enqueue_many(range(150))
            assert {v.kind for v in single + many} == {"enqueued"}
            assert sq.job(single[0].id) is not None
            assert sq.state(single[0].id) == "pending"
            sq.configure_lane("g", limit=4, rate=(100, 1.0))
            (lane,) = await queue.lanes(["g"])
            assert (lane.limit, lane.rate, lane.depth) == (4, (100, 1.0), 20)
            owner = router.owner(slot(queue.keys.root)).address
            if seeds == "one seed" and owner != f"{first.host}:{first.port}":
                assert sq._process.router.moved > 0  # learnt the owner from the cluster
            held = await router.nodes[owner].call(
                "CLUSTER", "COUNTKEYSINSLOT", slot(queue.keys.root)
            )
            assert held >= 170
        assert (await queue.counts()).pending == 170
        await queue.pause()
        await queue.obliterate(force=True)


async def test_wait_on_a_cluster_wakes_on_the_owning_node(
    router: ClusterRouter, spread: Spread, valkey_cluster: EmbeddedCluster
) -> None:
    for name in spread(router, 3, "sync-wait"):
        queue = Queue(name, router, result_ttl=60)
        with SyncQueue.connect(valkey_cluster.url, name) as sq:
            verdict = sq.enqueue({"x": 1})
            found: list[object] = []
            waiter = threading.Thread(
                target=lambda sq=sq, v=verdict, f=found: f.append(sq.wait(v.id))
            )
            waiter.start()
            job = await claim_job(queue)
            assert await queue.complete(job, result="done")
            await asyncio.to_thread(waiter.join, 20)
            (info,) = found
            assert info is not None
            assert (info.state, info.result) == ("completed", "done")  # type: ignore[attr-defined]
        await discard(queue)


async def test_events_and_a_wildcard_on_the_done_channel_reach_each_queues_own_node(
    router: ClusterRouter, spread: Spread, valkey_cluster: EmbeddedCluster
) -> None:
    first = valkey_cluster.primaries[0]
    url = f"valkey://{first.host}:{first.port}/0"  # one seed: each owner learnt from MOVED
    for name in spread(router, 3, "sync-events"):
        queue = Queue(name, router)
        owner = router.nodes[router.owner(slot(queue.keys.root)).address]
        with SyncQueue.connect(url, name) as sq:
            async with queue.subscribe() as events:
                one = sq.enqueue("one")  # its SPUBLISH is posted after the reply, not awaited
                many = sq.enqueue_many(range(3))
                heard = [(await asyncio.wait_for(events.get(), 5))["job"] for _ in range(4)]
                assert heard == [one.id, *(v.id for v in many)]
            assert sq.state(one.id) == "pending"  # the publishes' replies were nobody's answer
            found: list[object] = []
            waiter = threading.Thread(
                target=lambda sq=sq, job=one.id, f=found: f.append(sq.wait(job, 20))
            )
            waiter.start()
            while (await owner.call("PUBSUB", "SHARDNUMSUB", queue.keys.done))[1] != 1:
                await asyncio.sleep(0.01)
            await owner.call("DEL", queue.keys.job(one.id))  # as obliterate does, without its id
            assert await owner.call("SPUBLISH", queue.keys.done, "*") == 1
            await asyncio.to_thread(waiter.join, 10)
            assert found == [None]
        await discard(queue)


async def test_a_slot_migrating_under_the_producer_is_followed_and_loses_nothing(
    own_cluster: EmbeddedCluster,
) -> None:
    async with ClusterRouter(seeds_from_url(own_cluster.url)) as wire:
        name = "sync-migrating"
        queue = Queue(name, wire)
        queue_slot = slot(queue.keys.root)
        with SyncQueue.connect(own_cluster.url, name) as sq:
            admitted = [sq.enqueue(i) for i in range(30)]
            moving, errors = threading.Event(), []

            def produce() -> None:  # through the whole migration, and a little after it
                try:
                    while not moving.is_set():
                        admitted.append(sq.enqueue("during"))
                    admitted.extend(sq.enqueue_many(range(120)))
                    admitted.extend(sq.enqueue(f"after-{i}") for i in range(10))
                except Exception as exc:  # surfaced below
                    errors.append(exc)

            producer = threading.Thread(target=produce)
            producer.start()
            waited: list[object] = []  # a wait on the first job, through the whole move
            waiter = threading.Thread(target=lambda: waited.append(sq.wait(admitted[0].id, 60)))
            waiter.start()
            source = wire.owner(queue_slot)
            target = next(n.options for a, n in wire.nodes.items() if a != source.address)
            others = tuple(n.options for n in wire.nodes.values())
            try:
                await migrate_slot(source, target, queue_slot, others=others)
            finally:
                moving.set()
                await asyncio.to_thread(producer.join, 60)
            assert errors == []
            kept = Queue(name, wire, result_ttl=60)
            job = await claim_job(kept)  # the oldest: the first job admitted
            assert job.id == admitted[0].id
            assert await kept.complete(job, result="moved")
            await asyncio.to_thread(waiter.join, 30)
            (info,) = waited  # it followed the slot to the target and woke there
            assert (info.state, info.result) == ("completed", "moved")  # type: ignore[attr-defined]
            router = sq._process.router
            assert router.ask + router.moved > 0  # it met the move and followed it
            assert router.owners[queue_slot] == target.address
        assert {v.kind for v in admitted} == {"enqueued"}
        assert (await queue.counts()).pending + 1 == len({v.id for v in admitted}) == len(admitted)


async def test_a_wait_without_timeout_follows_its_queue_through_a_failover(
    own_cluster: EmbeddedCluster,
) -> None:
    victim, heir = own_cluster.primaries[0], own_cluster.replicas[0]  # heir replicates victim
    async with ClusterRouter(seeds_from_url(own_cluster.url)) as wire:
        name = name_on(wire, victim.port)
        with SyncQueue.connect(own_cluster.url, name) as sq:
            verdict = sq.enqueue("survives")
            assert await wire.wait_replicas(Queue(name, wire).keys.root, 1, timeout=5.0) == 1
            found: list[object] = []

            def wait() -> None:
                try:
                    found.append(sq.wait(verdict.id))
                except Exception as exc:  # surfaced below
                    found.append(exc)

            waiter = threading.Thread(target=wait)
            waiter.start()
            queue = Queue(name, wire, result_ttl=60)
            node = wire.nodes[f"{victim.host}:{victim.port}"]
            while (await node.call("PUBSUB", "SHARDNUMSUB", queue.keys.done))[1] != 1:
                await asyncio.sleep(0.01)  # the wait subscribed on the victim
            assert victim.pid is not None
            os.kill(victim.pid, signal.SIGKILL)  # its reconnects are refused until a seed knows
            assert admin(heir.host, heir.port, "CLUSTER", "FAILOVER", "TAKEOVER") == "+OK"
            for _ in range(100):  # the async side's first calls to the dead node are lost
                with contextlib.suppress(WireError):
                    job = await claim_job(queue)  # on the heir, once the router found it
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the heir never served the queue")
            assert await queue.complete(job, result="after the failover")
            await asyncio.to_thread(waiter.join, 30)
        (info,) = found
        assert not isinstance(info, BaseException), repr(info)
        assert (info.state, info.result) == ("completed", "after the failover")  # type: ignore[attr-defined]

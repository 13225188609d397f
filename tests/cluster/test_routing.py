"""Routing on a real cluster: queues spread over shards, per-node script caches, bad key sets."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from collections.abc import Callable

import pytest

from echomq.engine.keys import Keyspace, slot
from echomq.engine.queue import Queue
from echomq.engine.results import Job
from echomq.errors import CrossSlotError, InvalidArgument, ServerError
from echomq.server import EmbeddedCluster
from echomq.testing import discard
from echomq.wire.cluster import ClusterRouter, command_slot
from echomq.wire.connector import WIRE_VERSION, Connector
from echomq.wire.url import seeds_from_url

# The cluster wire's routing on asyncio's event loop and on uvloop's (tests/conftest.py).
pytestmark = pytest.mark.every_loop

Spread = Callable[[ClusterRouter, int, str], list[str]]


async def test_eight_queues_on_three_shards_each_served_by_its_own_shard(
    router: ClusterRouter, spread: Spread
) -> None:
    names = spread(router, 8, "eight")
    queues = [Queue(name, router) for name in names]

    async def work(queue: Queue) -> list[str]:
        await queue.enqueue_many(range(25))
        done = []
        while isinstance(job := await queue.claim(), Job):
            await queue.complete(job)
            done.append(job.id)
        return done

    done = await asyncio.gather(*(work(q) for q in queues))
    assert [len(ids) for ids in done] == [25] * 8
    # Each queue's keys sit in its own slot, on the primary the router sent it to, and nowhere
    # else: ask every primary how many keys it holds in each queue's slot.
    per_node: Counter[str] = Counter()
    for queue in queues:
        queue_slot = slot(queue.keys.root)
        owner = router.owner(queue_slot).address
        for address, node in router.nodes.items():
            held = await node.call("CLUSTER", "COUNTKEYSINSLOT", queue_slot)
            if address == owner:
                assert held > 0  # at least the completed counter
                per_node[address] += 1
            else:
                assert held == 0
    assert sorted(per_node.values()) == [2, 3, 3]  # three shards share the eight queues
    for queue in queues:
        await queue.pause()
        await queue.obliterate(force=True)


async def test_keys_spanning_slots_are_refused_before_any_traffic(router: ClusterRouter) -> None:
    a, b = Keyspace("span-a"), Keyspace("span-b")
    assert slot(a.root) != slot(b.root)
    writes = {address: node.writes for address, node in router.nodes.items()}
    with pytest.raises(CrossSlotError, match=r"MGET needs all its keys in one cluster slot"):
        await router.call("MGET", a.meta, b.meta)
    with pytest.raises(CrossSlotError, match=r"EVALSHA") as caught:
        router.call_many([("GET", a.meta), ("EVALSHA", "0" * 40, 2, a.root, b.root)])
    assert set(caught.value.slots) == {a.root, b.root}
    with pytest.raises(CrossSlotError):
        command_slot(("DEL", a.ring, b.ring))
    await asyncio.sleep(0)  # had anything been queued, this tick would flush it
    assert {address: node.writes for address, node in router.nodes.items()} == writes
    assert command_slot(("MGET", a.meta, a.ring)) == slot(a.root)  # one tag, one slot: fine


async def test_a_pipeline_over_three_shards_answers_in_caller_order(
    router: ClusterRouter, spread: Spread
) -> None:
    names = spread(router, 6, "order")
    keys = [Keyspace(name).meta for name in names]
    await router.call_many([("HSET", key, "n", i) for i, key in enumerate(keys)])
    replies = await router.call_many([("HGET", key, "n") for key in keys])
    assert replies == [str(i).encode() for i in range(6)]
    assert await router.call("DEL", keys[0]) == 1
    await router.call_many([("DEL", key) for key in keys[1:]])


async def test_each_node_reloads_scripts_it_lost(router: ClusterRouter, spread: Spread) -> None:
    # Every primary keeps its own script cache: flush one node's, and the queue on that node
    # reloads (NOSCRIPT inside a pipeline too) while the others never notice.
    name = spread(router, 1, "noscript")[0]
    queue = Queue(name, router)
    await queue.enqueue("warm")
    node = router.nodes[router.owner(slot(queue.keys.root)).address]
    assert await node.call("SCRIPT", "FLUSH") == b"OK"
    loads = queue.scripts.loads
    verdicts = await queue.enqueue_many(["a", "b"])
    assert [v.kind for v in verdicts] == ["enqueued", "enqueued"]
    assert queue.scripts.loads > loads
    await queue.pause()
    await queue.obliterate(force=True)


async def test_queue_connect_picks_the_router_from_one_seed_or_many(
    valkey_cluster: EmbeddedCluster, queue_name: str
) -> None:
    one_seed = valkey_cluster.primaries[0].url  # a single node: cluster_enabled is detected
    for url in (one_seed, valkey_cluster.url):
        queue = await Queue.connect(url, queue_name)
        assert isinstance(queue.wire, ClusterRouter)
        assert (await queue.enqueue("x")).kind == "enqueued"
        await discard(queue)


async def test_the_version_fence_lives_on_the_node_owning_its_slot(
    router: ClusterRouter,
) -> None:
    owner = router.nodes[router.address_of()]
    assert await owner.call("GET", "{emq}:version") == WIRE_VERSION.encode()
    others = [n for a, n in router.nodes.items() if a != router.address_of()]
    # Why the router checks the fence once, on the owner, and not in every node's handshake:
    async with Connector(others[0].options, version_fence=None) as other:
        with pytest.raises(ServerError, match="MOVED"):
            await other.call("SET", "{emq}:version", WIRE_VERSION, "NX", "GET")


def test_a_seed_list_names_every_node_and_refuses_an_empty_host() -> None:
    seeds = seeds_from_url("valkey://:pw@10.0.0.1:7001,10.0.0.2:7002/0?call_timeout=2")
    assert [(s.host, s.port, s.password, s.call_timeout) for s in seeds] == [
        ("10.0.0.1", 7001, "pw", 2.0),
        ("10.0.0.2", 7002, "pw", 2.0),
    ]
    with pytest.raises(InvalidArgument, match="an empty host in the seed list"):
        seeds_from_url("valkey://10.0.0.1:7001,,10.0.0.2:7002/0")


def _open_sockets() -> int:
    """This process's open sockets (Linux's ``/proc``, where the suite runs)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


async def test_a_connect_cancelled_at_any_step_leaves_no_socket_open(
    valkey_cluster: EmbeddedCluster,
) -> None:
    """An app closed while it connects cancels the router's connect: cancelled after each of its
    steps in turn (loop turns 0, 1, 2, … until one lets it finish), no primary's socket stays
    open. The map's read once left the connectors that came up before the cancel to no one (a
    cluster test's worker stopped while starting: 12 sockets for the collector)."""
    before = _open_sockets()
    turns = 0
    while True:
        router = ClusterRouter(seeds_from_url(valkey_cluster.url))
        connecting = asyncio.ensure_future(router.connect())
        for _ in range(turns):
            await asyncio.sleep(0)
        finished = connecting.done()
        connecting.cancel()
        await asyncio.gather(connecting, return_exceptions=True)
        await router.close()
        assert _open_sockets() == before, f"cancelled after {turns} loop turns"
        if finished:
            break
        turns += 1
    assert turns > 3  # the cancels did land inside the connect, at its several steps

"""Flows on a sharded queue (docs/concepts/shards.md, "One logical queue"): the nodes are
admitted on their lanes' shards, fenced, one call per shard; a child on another shard than its
parent tells it through its shard's outbox, relayed by that shard's upkeep to the parent's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from echomq import App, AppWorker, Job, Queue, group
from echomq.consumers.consumer import Consumer, ConsumerOptions
from echomq.engine import Empty, Flow, ShardedQueue, ShardMap
from echomq.engine.flows import by_shard, plan
from echomq.errors import Unsupported
from echomq.testing import discard, lane_on
from echomq.wire.codec import JsonCodec


@pytest.fixture
async def sharded(valkey_url: str, queue_name: str) -> AsyncIterator[ShardedQueue]:
    queue = await ShardedQueue.connect(valkey_url, queue_name, shards=3)
    yield queue
    await discard(queue)


async def test_a_parent_runs_after_its_children_on_other_shards_with_their_results(
    sharded: ShardedQueue,
) -> None:
    """The root on shard 1; children on shards 0, 2 and 1; a grandchild on shard 1 under the
    child on shard 2 (the shards nest both ways). A consumer runs them all: each parent after
    its children, reading their results."""
    placement = sharded.placement_map
    lane = [lane_on(placement, k, "f") for k in range(3)]
    flow = Flow(
        "root",
        [
            Flow("a", lane=lane[0]),
            Flow("b", [Flow("c", lane=lane[1])], lane=lane[2]),
            Flow("d", lane=lane[1]),
        ],
        lane=lane[1],
    )
    ids = await sharded.add_flow(flow)
    assert ids.kind == "enqueued"
    root, (a, b, d) = ids.id, ids.children
    homes = {"root": 1, "a": 0, "b": 2, "c": 1, "d": 1}
    nodes = {"root": root, "a": a.id, "b": b.id, "c": b.children[0].id, "d": d.id}
    for name, job_id in nodes.items():
        shard = sharded.shards[homes[name]]
        assert await shard.wire.call("EXISTS", shard.keys.job(job_id)) == 1
    assert await sharded.state(root) == "waiting"
    assert (await sharded.add_flow(flow_with_ids(flow, ids.ids))).kind == "duplicate"

    ran: list[str] = []
    read: dict[str, Any] = {}
    finished = asyncio.Event()

    async def handler(job: Job) -> str:
        ran.append(job.payload)
        if job.payload in ("root", "b"):
            read[job.payload] = (await sharded.children(job.id)).ordered()
        if job.payload == "root":
            finished.set()
        return f"{job.payload}!"

    consumer = Consumer(sharded, handler, ConsumerOptions(beat=0.1, concurrency=2))
    serving = asyncio.ensure_future(consumer.run())
    async with asyncio.timeout(10):
        await finished.wait()
    consumer.stop()
    await serving
    assert ran[-1] == "root"
    assert ran.index("b") > ran.index("c")
    assert read == {"b": ["c!"], "root": ["a!", "b!", "d!"]}


def flow_with_ids(flow: Flow, ids: list[str]) -> Flow:
    """``flow`` with its nodes' ids, parents before children (as ``FlowIds.ids``)."""
    given = iter(ids)

    def walk(node: Flow) -> Flow:
        job_id = next(given)
        kids = [walk(child) for child in node.children]
        return Flow(node.payload, kids, node.queue, node.lane, job_id)

    return walk(flow)


async def test_a_child_dying_on_another_shard_fails_its_parent(sharded: ShardedQueue) -> None:
    placement = sharded.placement_map
    parent_lane, child_lane = lane_on(placement, 2, "p"), lane_on(placement, 0, "p")
    ids = await sharded.add_flow(Flow("parent", [Flow("child", lane=child_lane)], lane=parent_lane))
    job = await sharded.claim()
    assert isinstance(job, Job)
    assert job.shard == 0
    assert await sharded.retry(job, delay=0, max_attempts=1, error="boom") == "dead"
    assert await sharded.state(ids.id) == "waiting"  # until shard 0's outbox is relayed
    await sharded.upkeep()  # every shard's: shard 0's relays its entry to shard 2
    parent = await sharded.job(ids.id)
    assert parent is not None
    assert parent.state == "dead"
    assert (await sharded.children(ids.id)).failed == {job.id: "boom"}
    assert isinstance(await sharded.claim(), Empty)
    # A completion on shard 1 for a parent on shard 2: the queue says a relay is due.
    done = await sharded.add_flow(
        Flow("parent", [Flow("child", lane=lane_on(placement, 1, "p"))], lane=parent_lane)
    )
    job = await sharded.claim()
    assert isinstance(job, Job)
    assert job.shard == 1
    assert not sharded.relay_due
    assert await sharded.complete(job, result="ok")
    assert sharded.relay_due
    await sharded.upkeep()
    assert not sharded.relay_due
    assert await sharded.state(done.id) == "pending"


def test_the_plan_by_shard_names_each_parent_shard_and_writes_parents_first() -> None:
    placement = ShardMap.create("q", 3)
    lane = [lane_on(placement, k, "x") for k in range(3)]
    counter = iter(range(1, 100))
    laid = plan(
        Flow("r", [Flow("a", lane=lane[2], children=[Flow("g", lane=lane[0])])], lane=lane[0]),
        "q",
        JsonCodec(),
        lambda: f"JOB{next(counter):011d}",
    )
    split = by_shard(laid, "q", placement.tags, placement.shard_of)
    assert list(split.writes) == ["q", "q~2"]  # shard 0 (root, depth 0) before shard 2
    by_id = {node.id: node for nodes in split.writes.values() for node in nodes}
    child = split.ids.children[0]
    grandchild = child.children[0]
    assert by_id[split.ids.id].parent_queue == ""
    assert by_id[child.id].parent_queue == "q"  # its parent is on shard 0
    assert by_id[grandchild.id].parent_queue == "q~2"  # its parent is on shard 2


async def test_a_flow_into_another_sharded_queue_is_refused(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    other = await ShardedQueue.connect(valkey_url, sharded.name + "-b", shards=2)
    try:
        with pytest.raises(Unsupported, match="two sharded queues"):
            await sharded.add_flow(Flow("parent", [Flow("child", queue=other.name)]))
        assert (await sharded.counts()).waiting == 0  # nothing written
    finally:
        await discard(other)


async def test_a_plain_queue_refuses_flow_nodes_on_a_sharded_queue_before_any_write(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    """From a queue of one slot, nodes naming a sharded queue would be written to its shard 0
    unfenced: refused by name, nothing written on either queue; the same flow through the
    sharded queue lands each node on its lane's shard."""
    plain = await Queue.connect(valkey_url, sharded.name + "-plain")
    try:
        lane = lane_on(sharded.placement_map, 2, "r")
        flows = [
            Flow("parent", [Flow("child", queue=sharded.name, lane=lane)]),  # a child there
            Flow("root", [Flow("leaf", queue=plain.name)], queue=sharded.name, lane=lane),
        ]
        for flow in flows:
            with pytest.raises(Unsupported, match=f"sharded queue {sharded.name!r}"):
                await plain.add_flow(flow)
        assert (await plain.counts()).waiting == 0  # nothing written: no parent waits here
        assert await plain.wire.call("KEYS", f"emq:{{{plain.name}}}:*") == []
        for shard in sharded.shards:
            assert await shard.wire.call("KEYS", f"emq:{{{shard.keys.tag}}}:job:*") == []
        child_there = Flow("child", queue=sharded.name, lane=lane)
        ids = await sharded.add_flow(Flow("parent", [child_there], queue=plain.name))
        assert ids.queue == plain.name
        (child,) = ids.children
        assert await sharded.shards[2].wire.call("EXISTS", sharded.shards[2].keys.job(child.id))
    finally:
        await discard(plain)


async def test_a_plain_queue_relays_to_a_parent_on_a_shard(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    """A child on a queue of one slot whose parent lives on shard 2: its queue's relay
    delivers to the shard its entry names by tag."""
    plain = await Queue.connect(valkey_url, sharded.name + "-plain")
    try:
        lane = lane_on(sharded.placement_map, 2, "q")
        ids = await sharded.add_flow(Flow("parent", [Flow("child", queue=plain.name)], lane=lane))
        child = await plain.claim()
        assert isinstance(child, Job)
        assert await plain.complete(child, result=7)
        assert await plain.relay() == 1
        assert await sharded.state(ids.id) == "pending"
        assert (await sharded.children(ids.id)).results == {child.id: 7}
    finally:
        await discard(plain)


async def test_a_task_group_across_shards_on_a_sharded_app(
    valkey_url: str, queue_name: str
) -> None:
    """The task layer's flows on ``App(shards=3)``: a group whose members' lanes sit on three
    shards, and its callback on another, run by a worker; the handle reads the result."""
    app = App(valkey_url, queue=queue_name, shards=3)

    @app.task(lane="tenant")
    async def size(tenant: str) -> int:
        return len(tenant)

    @app.task(lane="tenant")
    async def total(sizes: list[int], tenant: str) -> int:
        return sum(sizes)

    async with app:
        queue = app.queue()
        assert isinstance(queue, ShardedQueue)
        placement = queue.placement_map
        tenants = [lane_on(placement, k, "g") for k in range(3)]
        fan_in = await group(
            [size.call(t) for t in tenants], then=total.receiving(tenant=tenants[0])
        ).enqueue()
        await AppWorker(app, options=ConsumerOptions(beat=0.1)).run_until_idle()
        assert await fan_in.result(timeout=5) == sum(len(t) for t in tenants)
        await discard(queue)
    await app.close()

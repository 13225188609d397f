"""A sharded queue on one server (docs/concepts/shards.md): its directory made once, every
lane's jobs on its own shard, claims that visit the shards by the weights on their rings,
settles and reads that find a job's shard, and what it does not do yet refused by name."""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from typing import Any

import pytest

from echomq import App, AppWorker, Item, Job, Policy, Queue
from echomq.consumers.consumer import Consumer, ConsumerOptions
from echomq.engine import Empty, ShardedQueue
from echomq.errors import Closed, InvalidArgument
from echomq.testing import discard, lanes_on


async def test_the_first_open_makes_the_directory_and_later_opens_read_it(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    name = sharded.name
    assert sharded.placement_map.tags == (name, f"{name}~1", f"{name}~2")
    # --8<-- [start:open]
    again = await ShardedQueue.connect(valkey_url, name, shards=3)
    # --8<-- [end:open]
    try:
        assert isinstance(again, ShardedQueue)
        assert again.placement_map == sharded.placement_map
        assert [q.keys.root for q in again.shards] == [q.keys.root for q in sharded.shards]
    finally:
        await again.close()
    with pytest.raises(InvalidArgument, match="has 3 shards: grow it to 4") as refused:
        await ShardedQueue.connect(valkey_url, name, shards=4)
    assert refused.value.argument == "shards"
    fewer = await ShardedQueue.connect(valkey_url, name, shards=2)  # a setting from before a
    try:  # grow: the directory's count is the truth
        assert len(fewer.shards) == 3
    finally:
        await fewer.close()
    with pytest.raises(InvalidArgument, match="shards"):
        await ShardedQueue.connect(valkey_url, name, shards=0)


async def test_a_queue_holding_jobs_is_not_made_sharded_by_an_open(queue: Queue) -> None:
    await queue.enqueue("waiting")
    with pytest.raises(InvalidArgument, match="holds jobs") as refused:
        await ShardedQueue.open(queue.name, queue.wire, shards=2)
    assert refused.value.argument == "shards"
    assert await queue.wire.call("EXISTS", queue.keys.directory) == 0  # nothing written
    assert (await queue.counts()).pending == 1


async def test_each_lane_lives_on_its_own_shard_and_a_batch_keeps_its_order(
    sharded: ShardedQueue,
) -> None:
    lanes = [lane for part in lanes_on(sharded.placement_map, [2, 2, 2]) for lane in part]
    verdicts = await sharded.enqueue_many(Item(i, lane=lanes[i % 6]) for i in range(30))
    assert [v.kind for v in verdicts] == ["enqueued"] * 30
    single = await sharded.enqueue("one", lane=lanes[5])
    for k, shard in enumerate(sharded.shards):
        mine = {lane for lane in lanes if sharded.placement_map.shard_of(lane) == k}
        infos = await Queue.lanes(shard)
        assert {info.lane for info in infos} == mine  # no lane of another shard here
    for i, verdict in enumerate(verdicts):  # each job's row on its lane's shard
        home = sharded.shards[sharded.placement_map.shard_of(lanes[i % 6])]
        assert await home.wire.call("EXISTS", home.keys.job(verdict.id)) == 1
    assert (await sharded.counts()).pending == 31
    assert (await sharded.job(single.id)) is not None  # found on its shard by id
    seen: list[str] = []
    while isinstance(jobs := await sharded.claim_batch(4), list):
        assert all(job.shard == sharded.placement_map.shard_of(job.lane) for job in jobs)
        seen += [job.id for job in jobs]
        assert await sharded.complete_each(jobs) == ["completed"] * len(jobs)
    assert sorted(seen) == sorted([v.id for v in verdicts] + [single.id])
    counts = await sharded.counts()
    assert (counts.pending, counts.active, counts.completed) == (0, 0, 31)


async def test_weights_hold_across_shards_on_a_backlogged_flood(sharded: ShardedQueue) -> None:
    """One lane of weight 1 alone on shard 0, four of weight 1 on shard 1, one of weight 3 on
    shard 2: visiting shards in turn would give the lone lanes 4x and 1.3x their share; the
    stride over active weights gives each lane its weight's share of every claim (±5% after
    800 claims, the design's bound 20·W·(1 + 1/W_min) = 320)."""
    (alone,), four, (heavy,) = lanes_on(sharded.placement_map, [1, 4, 1], "w")
    await sharded.apply_policies(**{heavy: Policy(weight=3)})
    lanes = [alone, *four, heavy]
    await sharded.enqueue_many(Item(i, lane=lane) for lane in lanes for i in range(400))
    got: Counter[str] = Counter()
    for _ in range(800):
        job = await sharded.claim()
        assert not isinstance(job, Empty)
        got[job.lane] += 1
    weights = {lane: 3 if lane == heavy else 1 for lane in lanes}
    total = sum(weights.values())
    for lane in lanes:
        share = 800 * weights[lane] / total
        assert abs(got[lane] / share - 1) <= 0.05, (lane, got[lane], share)


async def test_an_empty_shard_is_not_visited_and_a_paused_lane_is_skipped(
    sharded: ShardedQueue,
) -> None:
    (a,), (b,), _ = lanes_on(sharded.placement_map, [1, 1, 0], "e")
    await sharded.enqueue_many([Item(1, lane=a), Item(2, lane=a), Item(3, lane=b)])
    await sharded.lane(a).pause()
    job = await sharded.claim()
    assert not isinstance(job, Empty)
    assert job.lane == b
    assert await sharded.claim() == Empty()  # a is paused; shard 2 never had work
    await sharded.lane(a).resume()
    job = await sharded.claim()
    assert not isinstance(job, Empty)
    assert job.lane == a


async def test_settles_by_id_find_the_shard_from_another_process(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    _, _, (lane,) = lanes_on(sharded.placement_map, [0, 0, 1], "s")
    first, second = await sharded.enqueue_many([Item("x", lane=lane), Item("y", lane=lane)])
    jobs = await sharded.claim_batch(2)
    assert isinstance(jobs, list)
    assert {job.shard for job in jobs} == {2}
    other = await ShardedQueue.connect(valkey_url, sharded.name, shards=3)
    try:  # another object knows none of these leases: it reads every shard to find them
        leases = [(job.id, job.attempts) for job in jobs]
        assert await other.extend_many([*leases, (jobs[0].id, 999)], lease=30.0) == [jobs[0].id]
        assert await other.complete(jobs[0].id, jobs[0].attempts, result="done")
        assert await other.retry(jobs[1].id, jobs[1].attempts, delay=60.0) == "scheduled"
        assert await other.state(first.id) == "absent"  # completed, no result kept
        assert await other.state(second.id) == "scheduled"
        assert await other.cancel(second.id) is not None
    finally:
        await other.close()


async def test_one_subscription_hears_the_events_of_every_shard(sharded: ShardedQueue) -> None:
    """Each shard publishes its own jobs' events on its own channel; ``subscribe`` hears them
    all on one subscription: admitted, leased and completed, on shards 0, 1 and 2."""
    lanes = [lane for part in lanes_on(sharded.placement_map, [1, 1, 1], "v") for lane in part]
    async with sharded.subscribe() as events:
        verdicts = [await sharded.enqueue(i, lane=lane) for i, lane in enumerate(lanes)]
        jobs = []
        while isinstance(job := await sharded.claim(), Job):
            jobs.append(job)
            assert await sharded.complete(job)
        assert sorted(job.shard for job in jobs) == [0, 1, 2]
        heard: set[tuple[str, str]] = set()
        wanted = {(kind, v.id) for v in verdicts for kind in ("enqueued", "active", "completed")}
        async with asyncio.timeout(5):
            while not wanted <= heard:
                event = await events.get()
                heard.add((event["event"], event["job"]))
    assert events.dropped == 0


def test_every_public_verb_of_a_queue_is_sharded_or_shard_agnostic() -> None:
    """A verb added to ``Queue`` must say what it does on a sharded queue: overridden there, or
    listed here because the base's body reaches the shards through the overridden ones."""
    through_overrides = {
        "claim", "claim_batch",  # claim_some
        "admit", "enqueue", "enqueue_in", "enqueue_at",  # _admit
        "enqueue_many", "admit_many",  # _send
        "complete_many",  # complete_each
        "encode_result", "publish", "relay", "relay_due",  # shard 0's own, by design
        "take_wire",  # the wire is shared by every shard: shard 0 closes it last
        "is_ordered", "fairness_in_force",  # written to every shard alike
        "add_flow",  # _add_flow
    }  # fmt: skip
    verbs = {
        name
        for name, _ in inspect.getmembers(Queue)
        if not name.startswith("_") and name not in through_overrides
    }
    missing = sorted(name for name in verbs if getattr(ShardedQueue, name) is getattr(Queue, name))
    assert missing == []


async def test_discard_deletes_every_shard_and_the_directory(
    valkey_url: str, queue_name: str
) -> None:
    """``discard`` (echomq.testing) on a sharded queue: every shard's keys and the directory."""
    sharded = await ShardedQueue.connect(valkey_url, queue_name, shards=2)
    await sharded.enqueue_many(Item(i, lane=f"d{i}") for i in range(10))
    await discard(sharded)
    probe = await Queue.connect(valkey_url, queue_name)
    try:
        assert await probe.wire.call("KEYS", f"emq:{{{queue_name}*") == []
    finally:
        await probe.close()


async def test_a_consumer_drains_every_shard_and_hears_a_cancel_on_any(
    sharded: ShardedQueue,
) -> None:
    """The consumer, unchanged, over a sharded queue: every shard's jobs run once, and a cancel
    of a running job on shard 2 reaches its handler through that shard's channel."""
    lanes = [lane for part in lanes_on(sharded.placement_map, [1, 1, 1], "c") for lane in part]
    stuck_lane = lanes[2]
    ran: Counter[str] = Counter()
    running = asyncio.Event()
    cancelled = asyncio.Event()

    async def handler(job: Job) -> None:
        if job.payload == "stuck":
            running.set()
            try:
                await asyncio.Event().wait()  # until the cancel stops it
            except asyncio.CancelledError:
                cancelled.set()
                raise
        ran[job.id] += 1

    # --8<-- [start:consume]
    verdicts = await sharded.enqueue_many(Item(i, lane=lanes[i % 3]) for i in range(30))
    stuck = await sharded.enqueue("stuck", lane=stuck_lane)
    consumer = Consumer(sharded, handler, ConsumerOptions(beat=0.1, concurrency=4))
    # --8<-- [end:consume]
    serving = asyncio.ensure_future(consumer.run())
    await running.wait()
    assert (await sharded.cancel(stuck.id)).outcome == "requested"
    await cancelled.wait()
    async with asyncio.timeout(20):
        while (await sharded.counts()).completed < 30:
            await asyncio.sleep(0.02)  # the consumer's progress has no event of its own here
    consumer.stop()
    await serving
    assert set(ran) == {v.id for v in verdicts}
    assert set(ran.values()) == {1}
    assert await sharded.state(stuck.id) in ("cancelled", "absent")


async def test_claims_that_find_the_refresh_due_together_share_one_read(
    sharded: ShardedQueue,
) -> None:
    await sharded.enqueue_many(Item(i, lane=f"r{i % 30}") for i in range(300))
    reads = 0
    read_loads = sharded.read_loads

    async def counted() -> list[Any]:
        nonlocal reads
        reads += 1
        return await read_loads()

    sharded.read_loads = counted  # type: ignore[method-assign]
    sharded.refresh = 3600.0  # none due unless made due below
    await sharded.claim_batch(1)
    reads = 0
    sharded.refresh = 0.0  # due for every claim that starts now
    batches = await asyncio.gather(*(sharded.claim_batch(10) for _ in range(12)))
    assert all(isinstance(b, list) for b in batches)
    assert reads == 1


async def test_an_app_runs_its_tasks_on_a_sharded_queue(valkey_url: str, queue_name: str) -> None:
    """``App(shards=3)``: the app's queue opens sharded with the app, its tasks' jobs go to
    their lanes' shards, a worker runs them all and a handle reads its result."""
    app = App(valkey_url, queue=queue_name, shards=3)

    @app.task(lane="tenant")
    async def greet(tenant: str) -> str:
        return f"hello {tenant}"

    with pytest.raises(Closed, match="connect"):
        app.queue()
    async with app:
        queue = app.queue()
        assert isinstance(queue, ShardedQueue)
        tenants = [lane for part in lanes_on(queue.placement_map, [2, 2, 2], "a") for lane in part]
        handles = [await greet.enqueue(tenant) for tenant in tenants]
        assert {queue.placement_map.shard_of(t) for t in tenants} == {0, 1, 2}
        tallies = await AppWorker(app, options=ConsumerOptions(beat=0.1)).run_until_idle()
        assert tallies[queue_name].completed == 6
        assert [await h.result(timeout=5) for h in handles] == [f"hello {t}" for t in tenants]
        await queue.pause()
        await queue.obliterate(force=True)
    await app.close()

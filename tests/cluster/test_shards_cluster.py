"""A sharded queue on the local 3-primary cluster under a 100:1 flood, and with one primary
killed: the other primaries' shards served while it is down, no acknowledged job lost once its
replica took over (docs/concepts/shards.md, plan item 8; the spread over the primaries is held
by test_sharded_queue_cluster.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections import Counter

from test_durability_cluster import aof_everywhere, waits
from test_failover import until

from echomq import Item, Job, Policy
from echomq.consumers.consumer import Consumer, ConsumerOptions
from echomq.engine import Durability, ShardedQueue, Verdict
from echomq.engine.keys import slot
from echomq.server import EmbeddedCluster
from echomq.server.cluster import admin
from echomq.testing import discard, lanes_on
from echomq.wire.cluster import ClusterRouter

SHARDS = 6
#: Weight-1 tenants per shard (the least active weight of a shard, W_min), the weight-100
#: tenant on shard 0 beside them, the flood tenant (weight 1, 100x the backlog) on shard 1.
PER_SHARD, VIP = 3, 100
#: Claimers (each its own queue, so its own stride: K workers) and their claim batch b.
WORKERS, BATCH = 3, 2


def jain(xs: list[float]) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


async def test_a_100_to_1_flood_keeps_every_lane_within_5_percent_of_its_weight(
    valkey_cluster: EmbeddedCluster,
) -> None:
    """18 tenants of weight 1 (three a shard), one of them with 100x the backlog of the others,
    and one of weight 100: K workers claiming b at a time give every lane its weight's share
    within ±5% over the bound's run length N = 20·W·(1 + K·b/W_min), all lanes backlogged."""
    name = f"flood-{uuid.uuid4().hex[:8]}"
    queue = await ShardedQueue.connect(valkey_cluster.url, name, shards=SHARDS)
    workers = [await ShardedQueue.open(name, queue.wire, shards=SHARDS) for _ in range(WORKERS)]
    try:
        tenants = [
            lane for part in lanes_on(queue.placement_map, [PER_SHARD] * 6, "t") for lane in part
        ]
        vip = next(lane for part in lanes_on(queue.placement_map, [1] * 6, "vip") for lane in part)
        flood = tenants[PER_SHARD]  # shard 1
        weights = {lane: 1 for lane in tenants} | {vip: VIP}
        total = sum(weights.values())  # W = 118
        run = 20 * total * (PER_SHARD + WORKERS * BATCH) // PER_SHARD  # N = 7,080
        # Backlogs: a weight-1 tenant needs N/W = 60 claims in the run, the VIP 100 N/W.
        base = 100
        backlog = {lane: base for lane in tenants} | {flood: 100 * base, vip: 70 * base}
        await queue.apply_policies(**{vip: Policy(weight=VIP)})
        verdicts = await queue.enqueue_many(
            Item(i, lane=lane) for lane, jobs in backlog.items() for i in range(jobs)
        )
        assert {v.kind for v in verdicts} == {"enqueued"}

        got: Counter[str] = Counter()

        async def drain(worker: ShardedQueue) -> None:
            while got.total() < run:
                jobs = await worker.claim_batch(BATCH)
                assert isinstance(jobs, list), jobs  # every lane is backlogged throughout
                got.update(job.lane for job in jobs)
                assert await worker.complete_each(jobs) == ["completed"] * len(jobs)

        started = asyncio.get_running_loop().time()
        await asyncio.gather(*(drain(worker) for worker in workers))
        took = asyncio.get_running_loop().time() - started

        claims = got.total()  # N, and at most K·(b − 1) more from the claims in flight at N
        assert all(got[lane] < backlog[lane] for lane in weights)  # none ran dry: all backlogged
        shares = {lane: got[lane] / (claims * w / total) for lane, w in weights.items()}
        worst = max(abs(share - 1) for share in shares.values())
        index = jain(list(shares.values()))
        print(
            f"\n100:1 flood, 6 shards on 3 primaries: {claims} claims by {WORKERS} workers "
            f"(batch {BATCH}) in {took:.1f} s; W = {total}, W_min = {PER_SHARD}; "
            f"worst lane {worst:.1%} off its weight share, Jain {index:.4f}; "
            f"VIP {got[vip]} (share {shares[vip]:.3f}), flood {got[flood]} "
            f"(share {shares[flood]:.3f}), weight-1 tenants {min(got[t] for t in tenants)}"
            f"..{max(got[t] for t in tenants)}"
        )
        assert worst <= 0.05, shares
        assert index >= 0.99
    finally:
        for worker in workers:
            await worker.close()
        await discard(queue)


async def test_a_killed_primary_loses_no_acknowledged_job_of_a_sharded_queue(
    own_cluster: EmbeddedCluster,
) -> None:
    """A producer acknowledged once a replica fsynced (``Durability(replicas=1)``, on every
    shard's primary), a consumer draining all six shards, one primary killed while both run:
    the other primaries' shards are served while it is down, and once its replica is promoted
    every acknowledged job has run (at least once, SPEC 7), none lost."""
    await aof_everywhere(own_cluster)
    victim, heir = own_cluster.primaries[0], own_cluster.replicas[0]  # heir replicates victim
    name = f"fo-{uuid.uuid4().hex[:8]}"
    # A replica's fsync is confirmed in milliseconds (the wait goes after the writes' replies),
    # now and then only by its next once-a-second ack on a loaded host: 1.5 s covers both.
    durable = Durability(replicas=1, timeout=1.5)
    producer = await ShardedQueue.connect(own_cluster.url, name, shards=SHARDS, durability=durable)
    worker = await ShardedQueue.connect(own_cluster.url, name, shards=SHARDS)  # another process
    router = producer.wire
    assert isinstance(router, ClusterRouter)
    placement = producer.placement_map
    lanes = [lane for part in lanes_on(placement, [2] * SHARDS, "t") for lane in part]
    per_round = [lane for lane in lanes for _ in range(10)]  # 20 jobs on each shard
    on_victim = {
        k
        for k, shard in enumerate(producer.shards)
        if router.owner(slot(shard.keys.root)).port == victim.port
    }
    assert len(on_victim) == 2
    acked: dict[str, int] = {}  # "enqueued" (on a replica's disk): the job's shard
    unknown = 0

    def take(verdicts: list[Verdict]) -> None:
        nonlocal unknown
        for verdict, lane in zip(verdicts, per_round, strict=True):
            if verdict.kind == "enqueued":
                acked[verdict.id] = placement.shard_of(lane)
            else:  # the victim's socket lost, or no replica confirmed: not acknowledged
                assert verdict.kind == "unknown", verdict
                unknown += 1

    # The batch waits for its fsyncs on every primary holding some of its shards (a wait
    # covers the writes its connection carried before it; a NOSCRIPT resend waits again).
    before = waits(own_cluster)
    take(await producer.enqueue_many(Item(i, lane=lane) for i, lane in enumerate(per_round)))
    after = waits(own_cluster)
    primaries = {f"{node.host}:{node.port}" for node in own_cluster.primaries}
    assert {a for a in after if after[a] > before[a]} == primaries
    assert len(acked) == len(per_round)

    killed = asyncio.Event()

    async def produce() -> None:
        """Rounds until the primary is killed (one may be in flight then), a few a second: a
        durable round takes milliseconds, and back to back they would pile up more than the
        other primaries' shards drain before the victim's replica takes over."""
        while not killed.is_set():
            take(
                await producer.enqueue_many(Item(i, lane=lane) for i, lane in enumerate(per_round))
            )
            await asyncio.sleep(0.25)  # pacing, not a wait for an event

    handled: Counter[str] = Counter()
    block = asyncio.Event()

    async def handler(job: Job) -> None:
        handled[job.id] += 1
        if len(handled) >= 30:
            await block.wait()  # jobs in hand, and a backlog on every shard, at the kill

    # A settle lost with the victim's socket leaves its job leased: an upkeep at most every
    # second reaps it soon after its lease (the default idle upkeep is 10 s).
    options = ConsumerOptions(beat=0.2, concurrency=4, lease=1.0, idle_upkeep=1.0)
    consumer = Consumer(worker, handler, options)
    running = asyncio.ensure_future(consumer.run())
    producing = asyncio.ensure_future(produce())
    try:
        await until(lambda: len(handled) >= 30)
        # Acknowledged, not yet run, on the primary about to die: only its replica keeps them.
        waiting = {i for i, k in acked.items() if k in on_victim} - handled.keys()
        assert waiting
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        killed.set()
        block.set()
        # Before any replica takes over (cluster-node-timeout 5 s), the other primaries'
        # shards are served: a shard whose primary is down only counts idle.
        elsewhere = {i for i, k in acked.items() if k not in on_victim}
        await until(lambda: elsewhere <= handled.keys())
        assert "role:slave" in admin(heir.host, heir.port, "INFO", "replication")
        assert admin(heir.host, heir.port, "CLUSTER", "FAILOVER", "TAKEOVER") == "+OK"
        await producing
        # Every acknowledged job runs; a settle lost with the victim's sockets runs its job
        # again after its lease (at least once). Then nothing is left anywhere.
        await until(lambda: acked.keys() <= handled.keys(), timeout=60)
        deadline = asyncio.get_running_loop().time() + 30
        while (counts := await producer.counts()).pending + counts.active + counts.scheduled:
            assert asyncio.get_running_loop().time() < deadline, counts
            await asyncio.sleep(0.05)
        assert counts.dead == 0
        for k in on_victim:
            assert router.owner(slot(producer.shards[k].keys.root)).port == heir.port
        again = sum(n > 1 for n in handled.values())
        print(
            f"\nprimary killed under a 6-shard queue: {len(acked)} acknowledged, {len(waiting)} "
            f"of them waiting on the killed primary; {unknown} unknown; {len(handled)} run, "
            f"{again} of them more than once"
        )
    finally:
        killed.set()
        block.set()
        consumer.stop()
        await asyncio.gather(running, producing, return_exceptions=True)
        await worker.close()
        await producer.close()


async def test_a_primary_that_stops_answering_holds_up_no_read_of_the_loads(
    own_cluster: EmbeddedCluster,
) -> None:
    """A primary that stops answering without closing its sockets (a frozen host, a
    partition; here SIGSTOP, for less than the cluster's node timeout) and that the load
    reads' keyless TIME goes to: a read of the loads waits ``LOAD_WAIT`` for its shards, not
    for the TIME, counts them idle, and the claims after it serve the other shards. Before,
    the read waited out the 5 s call timeout for the TIME and raised from the claim."""
    name = f"hung-{uuid.uuid4().hex[:8]}"
    queue = await ShardedQueue.connect(own_cluster.url, name, shards=SHARDS)
    router = queue.wire
    assert isinstance(router, ClusterRouter)
    keyless = next(address for address, node in router.nodes.items() if node.is_connected)
    victim = next(p for p in own_cluster.primaries if f"{p.host}:{p.port}" == keyless)
    on_victim = {
        k
        for k, shard in enumerate(queue.shards)
        if router.owner(slot(shard.keys.root)).address == keyless
    }
    assert len(on_victim) == 2
    assert victim.pid is not None
    lanes = [lane for part in lanes_on(queue.placement_map, [1] * SHARDS, "h") for lane in part]
    await queue.enqueue_many([Item(i, lane=lanes[i]) for i in range(SHARDS)])
    # The claim script loaded (a load goes to every primary: the stopped one's would wait)
    # and the server's clock known.
    while isinstance(warm := await queue.claim_batch(SHARDS), list):
        await queue.complete_each(warm)
    await queue.enqueue_many([Item(i, lane=lanes[i % SHARDS]) for i in range(SHARDS * 10)])
    await queue.read_loads()
    os.kill(victim.pid, signal.SIGSTOP)
    try:
        loads = await asyncio.wait_for(queue.read_loads(), 2.0)
        assert not any(loads[k].is_active for k in on_victim)
        assert all(loads[k].is_active for k in range(SHARDS) if k not in on_victim)
        claimed: list[Job] = []
        for _ in range(8):
            jobs = await asyncio.wait_for(queue.claim_batch(2), 2.0)
            assert isinstance(jobs, list)
            claimed += jobs
        assert {job.shard for job in claimed}.isdisjoint(on_victim)
    finally:
        os.kill(victim.pid, signal.SIGCONT)
        await discard(queue)

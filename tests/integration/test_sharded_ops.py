"""A sharded queue operated as one (docs/concepts/shards.md, "One logical queue"): opened by
its name as what it is, each shard's figures beside the sums (``shard_stats``, ``echomq
stats``), the CLI's verbs reaching every shard, and an obliterate that leaves no key of any
shard, so the name can be made again with another shard count."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest
from cli_rig import Cli, cli_fixture  # noqa: F401 (the fixture registers)

from echomq.consumers import ConsumerOptions, serve
from echomq.engine import (
    Empty,
    Item,
    Job,
    Policy,
    Queue,
    ShardedQueue,
    connect_queue,
    open_queue,
)
from echomq.engine.results import Counts
from echomq.engine.snapshot import read_snapshot
from echomq.errors import StateError
from echomq.testing import claim_job, discard, lanes_on

SHARDED = pytest.mark.parametrize("queue_kind", ["sharded"], indirect=True)


async def _keys_of(wire: Any, name: str) -> list[bytes]:
    """Every key of queue ``name`` and of its shards, found by SCAN (shard tags: ``name~…``)."""
    found: list[bytes] = []
    for pattern in (f"emq:{{{name}}}*", f"emq:{{{name}~*"):
        cursor = b"0"
        while True:
            cursor, keys = await wire.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            found += keys
            if cursor in (b"0", 0, "0"):
                break
    return found


@SHARDED
async def test_a_queue_opened_by_name_is_what_its_keys_say(
    queue: ShardedQueue, valkey_url: str, queue_name: str
) -> None:
    found = await open_queue(queue.name, queue.wire, events=False)
    try:
        assert isinstance(found, ShardedQueue)
        assert found.placement_map == queue.placement_map
    finally:
        await found.close()
    plain = await open_queue(f"{queue_name}-plain", queue.wire)
    assert type(plain) is Queue
    await plain.close()
    connected = await connect_queue(valkey_url, queue.name)
    try:
        assert isinstance(connected, ShardedQueue)
        await connected.enqueue("seen by the test's own queue")
    finally:
        await connected.close()
    assert (await queue.counts()).pending == 1  # the test's wire outlived connected's


@SHARDED
async def test_shard_stats_count_each_lanes_jobs_on_its_shard_and_sum_to_the_queue(
    queue: ShardedQueue,
) -> None:
    """Two lanes on shard 0, one on shard 1, two on shard 2 (one of weight 3): each shard's
    pending are its lanes' jobs, its W_s its ringed lanes' weights, and the sums the queue's."""
    placement = queue.placement_map
    per_shard = lanes_on(placement, [2, 1, 2], "s")
    heavy = per_shard[2][1]
    await queue.apply_policies(**{heavy: Policy(weight=3)})
    jobs = {lane: 2 + i for i, lane in enumerate(lane for part in per_shard for lane in part)}
    await queue.enqueue_many(Item(n, lane=lane) for lane, many in jobs.items() for n in range(many))
    claimed = await queue.shards[1].claim_batch(2)  # shard 1's only lane: 2 of its 4 jobs
    assert isinstance(claimed, list)
    assert len(claimed) == 2
    stats, counts = await asyncio.gather(queue.shard_stats(), queue.counts())
    assert [s.shard for s in stats] == [0, 1, 2]
    assert [s.tag for s in stats] == list(placement.tags)
    assert {s.primary for s in stats} == {queue.wire.options.address}
    for k, shard in enumerate(stats):
        assert shard.pending == sum(jobs[lane] for lane in per_shard[k]) - (2 if k == 1 else 0)
        assert shard.lanes == len(per_shard[k])
        assert shard.leased == (2 if k == 1 else 0)
        assert not shard.paused
    assert [s.weight for s in stats] == [2, 1, 1 + 3]
    assert sum(s.pending for s in stats) == counts.pending
    assert sum(s.leased for s in stats) == counts.active
    assert sum(s.lanes for s in stats) == counts.lanes
    assert stats[1].claims_per_second > 0  # the shard that served the claims, and only it
    assert stats[0].claims_per_second == stats[2].claims_per_second == 0.0


@SHARDED
async def test_reprocess_of_a_live_job_is_refused_by_the_shard_that_holds_it(
    queue: ShardedQueue,
) -> None:
    ((lane,),) = lanes_on(queue.placement_map, [0, 0, 1], "r")[2:]
    verdict = await queue.enqueue("x", lane=lane)
    with pytest.raises(StateError, match="EMQSTATE reprocess refused"):
        await queue.reprocess(verdict.id)
    assert await queue.remove(verdict.id)
    assert await queue.reprocess(verdict.id) is False


@SHARDED
async def test_the_cli_reads_and_steers_every_shard(queue: ShardedQueue, cli: Cli) -> None:
    placement = queue.placement_map
    (a,), (b,), (c,) = lanes_on(placement, [1, 1, 1], "c")
    await queue.enqueue_many(
        [Item(n, lane=a) for n in range(3)]
        + [Item(n, lane=b) for n in range(2)]
        + [Item(n, lane=c) for n in range(4)]
    )
    stats = (await cli("--json", "stats", queue.name)).json()
    assert stats["pending"] == 9
    assert [s["pending"] for s in stats["shards"]] == [3, 2, 4]
    assert [s["tag"] for s in stats["shards"]] == list(placement.tags)
    table = await cli("stats", queue.name)
    assert table.code == 0
    assert "W_s" in table.out
    assert placement.tags[2] in table.out, table.out
    lanes = {
        row["group"]: row["depth"] for row in (await cli("--json", "lanes", queue.name)).json()
    }
    assert lanes == {a: 3, b: 2, c: 4}

    paused = await cli("--json", "pause", queue.name)
    assert paused.json()["changed"] is True
    assert [await Queue.is_paused(shard) for shard in queue.shards] == [True] * 3
    assert (await cli("--json", "stats", queue.name)).json()["paused"] is True
    await cli("resume", queue.name)
    assert [await Queue.is_paused(shard) for shard in queue.shards] == [False] * 3

    assert (await cli("pause", queue.name, c)).code == 0  # the lane, on shard 2
    [info] = await Queue.lanes(queue.shards[2], [c])
    assert info.paused
    await cli("resume", queue.name, c)

    job = await claim_job(queue)
    assert await queue.retry(job, max_attempts=1, error="boom") == "dead"
    dead = (await cli("--json", "dead", queue.name)).json()
    assert [(d["id"], d["group"]) for d in dead] == [(job.id, job.lane)]
    assert (await cli("reprocess", queue.name, job.id)).code == 0
    assert await queue.state(job.id) == "pending"

    drained = await cli("--json", "drain", queue.name, "--yes")
    assert drained.json()["drained"] == 9
    assert [s.pending for s in await queue.shard_stats()] == [0, 0, 0]


async def test_obliterate_leaves_no_key_of_any_shard_and_the_name_can_be_made_again(
    valkey_url: str, queue_name: str
) -> None:
    queue = await ShardedQueue.connect(valkey_url, queue_name, shards=3)
    wire = queue.wire
    lanes = [lane for part in lanes_on(queue.placement_map, [2, 2, 2], "o") for lane in part]
    await queue.apply_policies(**{lanes[0]: Policy(weight=2, limit=3)})
    await queue.enqueue_many(Item(n, lane=lane) for lane in lanes for n in range(3))
    await queue.enqueue_in(60.0, "later", lane=lanes[5], dedup_key="once")
    leased = await claim_job(queue)
    assert isinstance(leased, Job)
    before = sorted(await _keys_of(wire, queue_name))
    with pytest.raises(StateError, match="not paused"):
        await queue.obliterate(force=True)
    await Queue.pause(queue.shards[1])  # one shard paused is not the queue paused
    with pytest.raises(StateError, match="not paused"):
        await queue.obliterate(force=True)
    await queue.pause()
    with pytest.raises(StateError, match="leased"):
        await queue.obliterate()
    assert sorted(await _keys_of(wire, queue_name)) == before  # refused: nothing deleted
    await queue.obliterate(force=True)
    assert await _keys_of(wire, queue_name) == []
    await queue.obliterate(force=True)  # nothing left: again is no error
    await queue.close()

    again = await ShardedQueue.connect(valkey_url, queue_name, shards=2)
    try:
        assert again.placement_map.tags == (queue_name, f"{queue_name}~1")
        await again.enqueue("fresh", lane=lanes[4])
        assert (await again.counts()).pending == 1
    finally:
        await discard(again)
    plain = await connect_queue(valkey_url, queue_name)
    try:
        assert type(plain) is Queue
        assert await plain.claim() == Empty(None)
    finally:
        await plain.close()


@SHARDED
async def test_a_handler_worker_serves_every_shard(queue: ShardedQueue, valkey_url: str) -> None:
    """``echomq worker module:handler --queue q`` opens the queue by name (``serve``): on a
    sharded queue its consumer drains every shard, not shard 0 alone."""
    lanes = [lane for part in lanes_on(queue.placement_map, [1, 1, 1], "w") for lane in part]
    await queue.enqueue_many(Item(n, lane=lane) for lane in lanes for n in range(2))
    ran: list[str] = []
    all_ran = asyncio.Event()

    async def handler(job: Job) -> None:
        ran.append(job.lane)
        if len(ran) == 6:
            all_ran.set()

    serving = asyncio.ensure_future(serve(valkey_url, queue.name, handler, ConsumerOptions()))
    await asyncio.wait_for(all_ran.wait(), 10)
    os.kill(os.getpid(), signal.SIGTERM)  # serve's own handler: stop, jobs in hand first
    tally = await serving
    assert sorted(ran) == sorted(lane for lane in lanes for _ in range(2))
    assert tally.completed == 6


@SHARDED
async def test_stats_show_the_queue_wide_budgets_and_each_shards_quota(
    queue: ShardedQueue, cli: Cli
) -> None:
    """The queue's ceiling and rate are the directory's budgets, not shard 0's quota; each
    shard's quotas sum to them, a shard holding none is marked ``noquota``, and the rate's
    spent claims are every shard's (``shard_stats``, ``echomq stats``)."""
    (a,), _, (c,) = lanes_on(queue.placement_map, [1, 0, 1], "g")
    await queue.enqueue_many(Item(n, lane=lane) for lane in (a, c) for n in range(3))
    assert [s.concurrency_quota for s in await queue.shard_stats()] == [None] * 3
    await queue.concurrency(4)
    await queue.rate_limit(6, 30.0)
    claimed = [await claim_job(queue) for _ in range(2)]
    stats = await queue.shard_stats()
    assert sum(s.concurrency_quota or 0 for s in stats) == 4
    assert sum(s.rate_quota or 0 for s in stats) == 6
    assert sum(s.rate_spent for s in stats) == 2
    # Shard 1 has no lane: it holds none of either budget, and its claims are refused.
    assert (stats[1].concurrency_quota, stats[1].rate_quota, stats[1].noquota) == (0, 0, True)
    assert [s.noquota for s in stats] == [False, True, False]
    [meta_ceiling] = await queue.wire.call("HMGET", queue.keys.meta, "concurrency")
    assert meta_ceiling != b"4"  # shard 0's quota: a part of the budget

    shown = (await cli("--json", "stats", queue.name)).json()
    assert shown["concurrency"] == 4
    limiter = shown["limiter"]
    assert (limiter["max"], limiter["window"], limiter["mode"]) == (6, 30.0, "smooth")
    assert (limiter["spent"], limiter["wait"]) == (2, 0.0)
    quotas = [(s["concurrency_quota"], s["rate_quota"]) for s in shown["shards"]]
    assert quotas == [(s.concurrency_quota, s.rate_quota) for s in stats]
    table = await cli("stats", queue.name)
    assert "quota" in table.out
    assert f"c {stats[0].concurrency_quota}, r {stats[0].rate_quota}" in table.out, table.out

    for job in claimed:
        await queue.complete(job)


@SHARDED
async def test_shards_prints_the_directory_and_moves_a_lane(queue: ShardedQueue, cli: Cli) -> None:
    """``echomq shards q``: the count, epoch, budgets, each shard's place, slots, lanes, W_s and
    quota, and the lanes a move placed; ``echomq shards q move LANE K`` moves one and says
    what moved; a bad shard or a missing lane is bad input (exit 2), nothing moved."""
    placement = queue.placement_map
    (a,), _, _ = lanes_on(placement, [1, 0, 0], "m")
    await queue.enqueue_many(Item(n, lane=a) for n in range(3))
    await queue.enqueue_in(60.0, "later", lane=a)
    await queue.concurrency(2)
    shown = (await cli("--json", "shards", queue.name)).json()
    assert (shown["count"], shown["epoch"], shown["placed"]) == (3, placement.epoch, {})
    assert shown["budgets"] == {"concurrency": 2, "rate": None}
    assert [s["tag"] for s in shown["shards"]] == list(placement.tags)
    assert sum(s["slots"] for s in shown["shards"]) == 16384
    assert [(s["lanes"], s["weight"]) for s in shown["shards"]] == [(1, 1), (0, 0), (0, 0)]
    assert sum(s["concurrency_quota"] for s in shown["shards"]) == 2
    table = await cli("shards", queue.name)
    assert (table.code, table.err) == (0, "")
    assert f"3 shards, epoch {placement.epoch}; budgets: concurrency 2" in table.out
    assert "placed: none" in table.out
    assert placement.tags[2] in table.out

    for bad in (["move", a, "3"], ["move", a, "-1"], ["move", a], ["move", a, "two"], ["go"]):
        try:
            code = (await cli("shards", queue.name, *bad)).code
        except SystemExit as refused:  # argparse's own refusal: exit 2 too
            code = int(str(refused.code))
        assert code == 2, bad
    assert queue.placement_map.shard_of(a) == 0  # nothing moved

    moved = await cli("--json", "shards", queue.name, "move", a, "2")
    assert moved.code == 0, moved.err
    assert moved.json() == {
        "queue": queue.name,
        "lane": a,
        "from": 0,
        "to": 2,
        "moved": True,
        "epoch": placement.epoch + 1,
        "pending": 3,
        "scheduled": 1,
        "leased": 0,
    }
    [info] = await Queue.lanes(queue.shards[2], [a])
    assert (info.depth, info.scheduled) == (3, 1)
    after = (await cli("--json", "shards", queue.name)).json()
    assert (after["epoch"], after["placed"]) == (placement.epoch + 1, {a: 2})
    assert [s["pending"] for s in after["shards"]] == [0, 0, 3]
    again = await cli("shards", queue.name, "move", a, "2")
    assert (again.code, again.out.strip()) == (0, f"lane {a} is on shard 2 already: nothing moved")
    back = await cli("shards", queue.name, "move", a, "0")
    assert back.out.startswith(f"moved lane {a} from shard 2 to shard 0 "), back.out
    assert "placed: none" in (await cli("shards", queue.name)).out


@SHARDED
async def test_shards_grow_grows_the_queue_online_and_loses_nothing(
    queue: ShardedQueue, cli: Cli, valkey_url: str
) -> None:
    """``echomq shards q grow N``: the queue grown to N shards with its jobs where their lanes
    now live, each claimed once; a count that is not a number, or no more than it has, is bad
    input (exit 2), nothing written."""
    await queue.enqueue_many(Item(n, lane=f"g{n % 12}") for n in range(48))
    for bad in (["grow"], ["grow", "five"], ["grow", "5", "1"]):
        try:
            code = (await cli("shards", queue.name, *bad)).code
        except SystemExit as refused:  # argparse's own refusal: exit 2 too
            code = int(str(refused.code))
        assert code == 2, bad
    shrink = await cli("shards", queue.name, "grow", "2")
    assert shrink.code == 1  # a verb not built: refused by name, as any failing verb
    assert "shrinking a sharded queue (3 to 2 shards) is not built yet" in shrink.err
    assert (await cli("--json", "shards", queue.name)).json()["count"] == 3
    grown = await cli("shards", queue.name, "grow", "5")
    assert (grown.code, grown.out.strip()) == (0, f"{queue.name} grew from 3 to 5 shards")
    again = await cli("shards", queue.name, "grow", "5")
    assert again.out.strip() == f"{queue.name} has 5 shards already: nothing grown"
    shown = (await cli("--json", "shards", queue.name)).json()
    assert shown["count"] == 5
    assert sum(s["pending"] for s in shown["shards"]) == 48
    wider = await ShardedQueue.connect(valkey_url, queue.name, shards=3)
    try:  # a process opened with the old count: the directory's is the truth
        assert len(wider.shards) == 5
        seen: list[int] = []
        while isinstance(jobs := await wider.claim_batch(10), list):
            assert all(job.shard == wider.placement_map.shard_of(job.lane) for job in jobs)
            seen += [job.payload for job in jobs]
            await wider.complete_each(jobs)
        assert sorted(seen) == list(range(48))
    finally:
        await wider.close()
    # This object opened at 3: an admin write reads the directory's epoch first, so a pause
    # reaches the shards another process added before its next load read.
    await queue.pause()
    assert len(queue.shards) == 5
    assert [await Queue.is_paused(shard) for shard in queue.shards] == [True] * 5


@SHARDED
async def test_a_snapshot_reads_each_shards_counts_once(
    queue: ShardedQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue's counts in a snapshot (``echomq stats``, the dashboard, ``/metrics``) are
    summed from the shard figures read beside them, not read from every shard a second time."""
    await queue.enqueue_many(Item(i, lane=f"s{i}") for i in range(9))
    reads = 0
    read_counts = Queue.counts

    async def counted(self: Queue) -> Counts:
        nonlocal reads
        reads += 1
        return await read_counts(self)

    monkeypatch.setattr(Queue, "counts", counted)
    snapshot = await read_snapshot(queue, dead=0)
    assert reads == len(queue.shards)
    assert snapshot.counts.pending == 9 == sum(s.pending for s in snapshot.shards)

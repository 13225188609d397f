"""The load a sharded queue's claim carries back (docs/concepts/shards.md, "Visiting the
shards"): the reply of each claim tells the worker's stride its shard's load after the claim —
its most urgent band with a ringed lane and that band's active weight — and when its first
rate-benched lane returns, so the visit that changed them reports them without a refresh read.
A plain queue's claim asks for none of it and gets the reply it always had."""

from __future__ import annotations

from typing import Any

from echomq import Item, Job, Policy, Queue
from echomq.engine import Empty, ShardedQueue
from echomq.engine.checks import text
from echomq.engine.queue import DEFAULT_LEASE
from echomq.engine.shard_schedule import IDLE, ShardLoad
from echomq.engine.transitions import Claimed
from echomq.testing import lanes_on


def count_reads(sharded: ShardedQueue) -> list[int]:
    """Count ``sharded``'s reads of every shard's load from now on (a one-item list)."""
    reads = [0]
    read_loads = sharded.read_loads

    async def counted() -> list[Any]:
        reads[0] += 1
        return await read_loads()

    sharded.read_loads = counted  # type: ignore[method-assign]
    return reads


async def claim_one(sharded: ShardedQueue) -> Job:
    job = await sharded.claim()
    assert isinstance(job, Job), job
    return job


async def test_a_claim_tells_the_stride_its_shards_new_load_without_a_read(
    sharded: ShardedQueue,
) -> None:
    """Two lanes on shard 1 (weights 1 and 2): each claim's reply moves the stride's view of
    shard 1 (a lane emptied: its weight gone; the last: idle) with no read after the first."""
    _, (light, heavy), _ = lanes_on(sharded.placement_map, [0, 2, 0], "l")
    await sharded.apply_policies(**{heavy: Policy(weight=2)})
    await sharded.enqueue_many(
        [Item("a", lane=light), Item("b", lane=heavy), Item("c", lane=heavy)]
    )
    reads = count_reads(sharded)
    sharded.refresh = 3600.0  # the first claim reads (none yet); no refresh after it
    stride = sharded._stride
    first = await claim_one(sharded)
    assert reads[0] == 1
    assert first.lane == light  # the ring's head: light joined first
    assert stride.load(1) == ShardLoad(5, 2)  # light emptied: heavy alone, weight 2
    assert (await claim_one(sharded)).lane == heavy
    assert stride.load(1) == ShardLoad(5, 2)
    assert (await claim_one(sharded)).lane == heavy
    assert stride.load(1) == IDLE  # emptied by this claim: idle, heard from the reply
    assert reads[0] == 1
    assert stride.pick() is None
    assert await sharded.claim_batch(1) == Empty()
    assert reads[0] == 2  # "empty" is answered only after a read newer than the call


async def test_a_band_change_is_heard_from_the_claim_that_made_it(sharded: ShardedQueue) -> None:
    """A lane whose urgent job (band 8) is claimed goes on in band 5: the stride hears the
    shard's new top band from that claim's reply."""
    (lane,), _, _ = lanes_on(sharded.placement_map, [1, 0, 0], "b")
    await sharded.enqueue("urgent", lane=lane, priority=8)
    await sharded.enqueue("later", lane=lane)
    reads = count_reads(sharded)
    sharded.refresh = 3600.0
    assert (await claim_one(sharded)).payload == "urgent"
    assert sharded._stride.load(0) == ShardLoad(5, 1)
    assert reads[0] == 1  # the claim's own first read saw band 8; the reply says 5


async def test_a_claim_that_benches_a_lane_tells_when_it_returns(sharded: ShardedQueue) -> None:
    """A lane at a rate of 1 per minute is benched by its first claim: the reply carries its
    return (the shard's first `rdue` score), which the queue's hints count from."""
    _, _, (lane,) = lanes_on(sharded.placement_map, [0, 0, 1], "r")
    await sharded.apply_policies(**{lane: Policy(rate=(1, 60.0))})
    await sharded.enqueue_many([Item(1, lane=lane), Item(2, lane=lane)])
    sharded.refresh = 3600.0
    job = await claim_one(sharded)
    shard = sharded.shards[2]
    ((_member, score),) = await shard.wire.call("ZRANGE", shard.keys.rdue, 0, 0, "WITHSCORES")
    assert sharded._dues[2] == int(float(score))
    assert sharded._stride.load(2) == IDLE
    now = job.deadline_ms - int(DEFAULT_LEASE * 1000)  # the claim's clock: deadline less lease
    assert sharded._now_ms == now
    assert abs(sharded._due_later(set())[0] - 60.0) < 0.5


async def test_a_plain_queues_claim_reply_is_unchanged(queue: Queue) -> None:
    """Without the load flag the reply is what it always was: deadline, more, then four words
    a job; with it (a shard's claim) three more close it, which the engine takes off."""
    await queue.enqueue_many([Item("x", lane="p"), Item("y", lane="q")])
    claimed = await queue.engine.claim(30_000, 1)
    assert isinstance(claimed, Claimed)
    assert claimed.load is None
    assert len(claimed.reply) == 6
    assert claimed.more
    claim = queue.scripts.scripts["claim"]
    raw = await queue.wire.call("EVALSHA", claim.sha, 2, *queue.engine._keys, 30_000, 1)
    assert len(raw) == 6
    assert raw[1] == 0
    assert text(raw[5]) == "q"
    await queue.enqueue("z", lane="p", priority=7)
    await queue.enqueue("w", lane="q")
    loaded = await queue.engine.claim(30_000, 1, load=True)
    assert isinstance(loaded, Claimed)
    assert len(loaded.reply) == 6
    assert text(loaded.reply[5]) == "p"
    assert loaded.load == (5, 1, -1)  # p emptied; q alone in band 5; nothing benched

"""The fence of a sharded queue (docs/concepts/shards.md, "The fence"), on three shards of one
queue on one server: a shard admits the items of the lanes it serves (``owns`` bit set and not
``moved``, or ``adopted``) and refuses the others with ``EMQMOVED`` (:class:`LaneMoved`), writing
nothing of them: enqueue (one item, and a batch's items each), flow and reassign. An unsharded
queue's admissions carry no fence and take no part in it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from echomq import Queue
from echomq.engine import JobOptions
from echomq.engine.flows import Node
from echomq.engine.options import FENCE_MARK, admission, fence
from echomq.engine.producer import Batch
from echomq.engine.results import Verdict
from echomq.engine.shards import ShardMap, lane_slot
from echomq.engine.transitions import Engine
from echomq.errors import ArgumentRefused, InvalidArgument, LaneMoved


@dataclass
class Shards:
    """A 3-shard map over ``queue`` (shard 0 is the queue's own keyspace), each shard's fence
    written from the map, an engine per shard, and lanes by the shard their slot names."""

    queue: Queue
    map: ShardMap
    engines: list[Engine]

    def mint(self) -> str:
        return self.queue.minter.mint("JOB")

    def lane(self, shard: int, n: int = 0) -> str:
        """The ``n``-th lane (by name, ``lane0``, ``lane1`` …) whose lane slot is ``shard``'s."""
        found = (
            f"lane{i}" for i in range(10_000) if self.map.owner(lane_slot(f"lane{i}")) == shard
        )
        for _ in range(n):
            next(found)
        return next(found)

    async def install(self, shard_map: ShardMap) -> None:
        self.map = shard_map
        for k in range(shard_map.shards):
            await self.queue.wire.call_many(shard_map.fence_commands(k))

    async def send(self, shard: int, jobs: Sequence[tuple[Any, JobOptions]]) -> list[Verdict]:
        """``jobs`` sent to shard ``shard`` as a producer holding the map sends them."""
        batch = Batch.pairs(jobs, self.queue.codec, self.mint)
        lanes = [item.group for item in batch.admissions]
        replies = await self.engines[shard].enqueue(batch.admissions, self.map.fence(lanes))
        return batch.settle(replies)

    async def contents(self, shard: int) -> dict[bytes, Any]:
        """Every key of shard ``shard`` with what it holds (DUMP), to compare before and after."""
        keys: list[bytes] = []
        cursor = b"0"
        pattern = f"emq:{{{self.map.tags[shard]}}}:*"
        while True:
            cursor, batch = await self.queue.wire.call("SCAN", cursor, "MATCH", pattern)
            keys += batch
            if cursor in (b"0", 0, "0"):
                break
        dumps = await self.queue.wire.call_many([("DUMP", key) for key in keys])
        return dict(zip(keys, dumps, strict=True))


@pytest.fixture
async def shards(queue: Queue) -> AsyncIterator[Shards]:
    await queue.minter.ready()
    shard_map = ShardMap.create(queue.name, 3)
    engines = [Engine(queue.wire, shard_map.keyspace(k), queue.scripts) for k in range(3)]
    made = Shards(queue, shard_map, engines)
    await made.install(shard_map)
    yield made
    for k in range(1, 3):  # shard 0 is the queue's own keyspace: its fixture discards it
        keys = list(await made.contents(k))
        if keys:
            await queue.wire.call("DEL", *keys)
    home = shard_map.keyspace(0)
    await queue.wire.call("DEL", home.owns, home.moved, home.adopted)


async def test_a_stale_producer_is_refused_and_nothing_is_written_on_the_wrong_shard(
    shards: Shards,
) -> None:
    mine, other = shards.lane(1), shards.lane(2)
    (verdict,) = await shards.send(1, [("a", JobOptions(lane=mine))])
    assert verdict.kind == "enqueued"
    before = await shards.contents(1)
    counts = await shards.engines[1].counts()
    stale = [
        ("b", JobOptions(lane=other)),
        ("c", JobOptions(lane=other, dedup_key="d1", delay=60)),
        ("d", JobOptions(lane=other, dedup_key="d2", debounce=5)),
    ]
    verdicts = await shards.send(1, stale)
    assert [v.kind for v in verdicts] == ["rejected"] * 3
    for v in verdicts:
        assert isinstance(v.error, LaneMoved)
        assert v.reason == "lane moved"
        assert (v.error.shard, v.error.epoch, v.error.sent, v.error.lane) == (None, 1, 1, other)
    assert await shards.contents(1) == before
    assert await shards.engines[1].counts() == counts
    # Sent where its lane lives, the same item is admitted.
    (verdict,) = await shards.send(2, stale[:1])
    assert verdict.kind == "enqueued"


async def test_moved_names_the_target_and_adopted_admits_a_lane_whose_slot_is_not_owned(
    shards: Shards,
) -> None:
    lane = shards.lane(1)
    created = shards.map
    await shards.install(ShardMap(created.tags, created.table, ((lane, 2),), epoch=2))
    assert await shards.queue.wire.call("HGET", shards.map.keyspace(1).moved, lane) == b"2"
    before = await shards.contents(1)
    (verdict,) = await shards.send(1, [("x", JobOptions(lane=lane))])
    assert verdict.kind == "rejected"
    assert isinstance(verdict.error, LaneMoved)
    assert (verdict.error.shard, verdict.error.epoch) == (2, 2)
    assert await shards.contents(1) == before
    (verdict,) = await shards.send(2, [("x", JobOptions(lane=lane))])
    assert verdict.kind == "enqueued"
    assert await shards.queue.wire.call("ZCARD", shards.map.keyspace(2).lane(lane)) == 1
    # One enqueue raises the refusal itself.
    item = admission(shards.queue.codec, shards.mint, "y", JobOptions(lane=lane))
    with pytest.raises(LaneMoved) as refused:
        await shards.engines[1].enqueue_one(item, shards.map.fence([lane]))
    assert refused.value.shard == 2


async def test_a_batch_of_mixed_lanes_answers_a_verdict_per_item_in_order(shards: Shards) -> None:
    lanes = [shards.lane(0), shards.lane(1), shards.lane(0, 1), shards.lane(2), shards.lane(0)]
    verdicts = await shards.send(0, [(i, JobOptions(lane=lane)) for i, lane in enumerate(lanes)])
    assert [v.kind for v in verdicts] == [
        "enqueued",
        "rejected",
        "enqueued",
        "rejected",
        "enqueued",
    ]
    assert [v.error.lane for v in verdicts if isinstance(v.error, LaneMoved)] == [
        lanes[1],
        lanes[3],
    ]
    assert (await shards.engines[0].counts())[0] == 3


async def test_fence_words_are_checked_before_any_write(shards: Shards) -> None:
    with pytest.raises(InvalidArgument, match="epoch"):
        fence(-1, [0])
    with pytest.raises(InvalidArgument, match="slot"):
        fence(1, [16384])
    lane = shards.lane(0)
    item = admission(shards.queue.codec, shards.mint, "z", JobOptions(lane=lane))
    engine = shards.engines[0]
    enqueue = shards.queue.scripts["enqueue"]
    before = await shards.contents(0)
    with pytest.raises(ArgumentRefused, match="epoch"):
        await engine.registry.run(
            engine.wire, enqueue, (engine.keys.root, engine.keys.gate), [FENCE_MARK, -1, *item, 0]
        )
    (code, detail, _) = await engine.registry.run(
        engine.wire, enqueue, (engine.keys.root, engine.keys.gate), [FENCE_MARK, 1, *item, 16384]
    )
    assert code == -1
    assert detail.startswith(b"EMQARG slot 16384")
    assert await shards.contents(0) == before


def leaf(job_id: str, lane: str) -> Node:
    return Node(job_id, b'"p"', lane, "", "", "fail", ())


async def test_a_flow_with_a_node_of_another_shards_lane_is_refused_whole(shards: Shards) -> None:
    mint = shards.mint
    parent, kid, stray = mint(), mint(), mint()
    mine, other = shards.lane(1), shards.lane(0)
    nodes = [Node(parent, b'"p"', mine, "", "", "fail", (kid, stray)), leaf(kid, mine)]
    before = await shards.contents(1)
    refused = [*nodes, leaf(stray, other)]
    with pytest.raises(LaneMoved) as moved:
        await shards.engines[1].flow(
            [n.args() for n in refused], shards.map.fence([mine, mine, other])
        )
    assert moved.value.lane == other
    assert await shards.contents(1) == before
    nodes[0] = Node(parent, b'"p"', mine, "", "", "fail", (kid,))
    admitted = await shards.engines[1].flow(
        [n.args() for n in nodes], shards.map.fence([mine, mine])
    )
    assert admitted == (True, "")


async def test_reassign_to_a_lane_another_shard_serves_is_refused(shards: Shards) -> None:
    here, there = shards.lane(0), shards.lane(0, 1)
    (verdict,) = await shards.send(0, [("r", JobOptions(lane=here))])
    engine = shards.engines[0]
    with pytest.raises(LaneMoved):
        await engine.reassign(verdict.id, shards.lane(2), shards.map.fence([shards.lane(2)]))
    assert await engine.reassign(verdict.id, there, shards.map.fence([there]))
    assert await shards.queue.wire.call("ZCARD", engine.keys.lane(there)) == 1


async def test_an_unsharded_queue_admits_every_lane_and_writes_no_fence(queue: Queue) -> None:
    lanes = [f"lane{i}" for i in range(12)]
    verdicts = await queue.enqueue_many(range(12))
    verdicts += [await queue.enqueue(i, lane=lane) for i, lane in enumerate(lanes)]
    assert all(v.kind == "enqueued" for v in verdicts)
    keys = queue.keys
    assert await queue.wire.call("EXISTS", keys.owns, keys.moved, keys.adopted) == 0
    assert await queue.wire.call("HMGET", keys.meta, "shard", "epoch") == [None, None]

"""Moving one lane between shards of a sharded queue (docs/concepts/shards.md, "Moving a lane"),
on three shards of one queue on one server: a lane frozen on its source (``moved``) or held on
its target (``adopted`` naming its source) is served by neither, as a paused lane is."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from echomq import Item, Job, Queue
from echomq.engine import Empty, Flow, ShardedQueue
from echomq.engine.lane_move import STEPS, LaneMove
from echomq.errors import InvalidArgument
from echomq.testing import lane_on, lanes_on


async def test_a_lane_frozen_on_its_source_is_not_claimed_there(sharded: ShardedQueue) -> None:
    lane = lane_on(sharded.placement_map, 0)
    source = sharded.shards[0]
    await sharded.enqueue_many(Item(f"j{i}", lane=lane) for i in range(3))
    await source.wire.call("HSET", source.keys.moved, lane, 1)
    # Whatever rings a lane asks serviceable(): a resume (here, of a lane not paused) is one.
    await source.lane(lane).pause()
    await source.lane(lane).resume()
    assert isinstance(await sharded.claim(), Empty)
    assert await source.wire.call("LLEN", source.keys.ring) == 0
    await source.wire.call("HDEL", source.keys.moved, lane)
    await source.lane(lane).resume()
    claimed = await sharded.claim()
    assert not isinstance(claimed, Empty)
    assert claimed.payload == "j0"


async def test_a_lane_held_on_its_target_is_not_claimed_until_released(
    sharded: ShardedQueue,
) -> None:
    lane = lane_on(sharded.placement_map, 0)
    target = sharded.shards[1]
    source = sharded.shards[0]
    await source.wire.call("HSET", source.keys.moved, lane, 1)  # frozen there toward shard 1
    # Arriving from shard 0: held (as lane_adopt.lua writes it, in ``moved`` too).
    await target.wire.call("HSET", target.keys.adopted, lane, 0)
    await target.wire.call("HSET", target.keys.moved, lane, 0)
    # Refused on shard 0, then held on shard 1: looked for on 0, sent to 1 again, admitted.
    await sharded.enqueue_many([Item("early", lane=lane), Item("late", lane=lane)])
    assert (await target.counts()).pending == 2
    assert isinstance(await sharded.claim(), Empty)
    await target.wire.call("HSET", target.keys.adopted, lane, "")  # released (lane_adopt.lua)
    await target.wire.call("HDEL", target.keys.moved, lane)
    await target.lane(lane).resume()
    claimed = await sharded.claim()
    assert not isinstance(claimed, Empty)
    assert claimed.payload == "early"
    assert claimed.shard == 1


async def wait_for(check: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``check`` (a server read) until it holds, for at most 5 s."""
    for _ in range(500):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never held")


async def test_a_lane_moves_under_load_losing_nothing_and_keeping_order_ceiling_and_rate(
    sharded: ShardedQueue,
) -> None:
    lane = lane_on(sharded.placement_map, 0)
    other = lane_on(sharded.placement_map, 0, prefix="o")  # stays on shard 0, served throughout
    source, target = sharded.shards[0], sharded.shards[2]
    await sharded.lane(lane).limit(2)
    await sharded.lane(lane).rate(1000, 1.0)
    await sharded.enqueue_many(Item(f"p{i:02}", lane=lane) for i in range(20))
    await sharded.enqueue_many(Item(f"o{i}", lane=other) for i in range(5))
    await sharded.enqueue_in(0.05, "delayed", lane=lane)
    leased = await sharded.claim_batch(2, one_lane=True)  # in flight on shard 0 at the freeze
    assert isinstance(leased, list)
    assert [job.payload for job in leased] == ["p00", "p01"]

    mover = asyncio.create_task(sharded.move_lane(lane, to=2, batch=7))
    await wait_for(lambda: source.wire.call("HEXISTS", source.keys.moved, lane))
    # Frozen and held: the lane is served by neither shard, the other lane still is.
    others = await sharded.claim_batch(10)
    assert isinstance(others, list)
    assert {job.payload for job in others} == {f"o{i}" for i in range(5)}
    await sharded.complete_each(others)
    # A producer keeps sending the lane's jobs: refused on shard 0, admitted held on shard 2.
    during = await sharded.enqueue_many(Item(f"q{i}", lane=lane) for i in range(5))
    assert {v.kind for v in during} == {"enqueued"}
    assert not mover.done()  # the two leases hold the drain
    await sharded.complete_each(leased)
    assert await mover is True

    assert sharded.placement_map.shard_of(lane) == 2
    assert await source.wire.call("EXISTS", source.keys.lane(lane), source.keys.glimit) == 0
    assert await target.wire.call("HGET", target.keys.glimit, lane) == b"2"
    assert await target.wire.call("HGET", target.keys.grate, lane) == b"1000:1000:smooth"
    assert await target.wire.call("LLEN", target.keys.lane_claims(lane)) == 2  # a's window
    ran = [job.payload for job in leased]
    while len(ran) < 26:
        jobs = await sharded.claim_batch(10)
        if isinstance(jobs, Empty):
            await sharded.promote()
            continue
        assert len(jobs) <= 2  # the ceiling, on the new shard
        assert {job.shard for job in jobs} == {2}
        ran += [job.payload for job in jobs]
        await sharded.complete_each(jobs)
    in_order = [p for p in ran if p != "delayed"]
    assert in_order == [f"p{i:02}" for i in range(20)] + [f"q{i}" for i in range(5)]
    assert sorted(ran) == sorted({*in_order, "delayed"})
    # A producer with the map before the move is sent on by the old shard's fence.
    assert (await sharded.enqueue("late", lane=lane)).kind == "enqueued"
    assert (await target.counts()).pending == 1


#: Where a mover stops: after each step, and inside the copy (a batch written to the target,
#: not yet deleted from the source).
STOPS = [*(STEPS[:n] for n in range(1, len(STEPS))), ("adopt", "freeze", "drain", "half")]


async def test_a_mover_stopped_between_any_two_steps_is_finished_by_running_it_again(
    sharded: ShardedQueue,
) -> None:
    lanes = [lane_on(sharded.placement_map, 0, prefix=f"s{n}-") for n in range(len(STOPS))]
    for lane in lanes:
        await sharded.lane(lane).limit(3)
        await sharded.enqueue_many(
            Item(f"{lane}/{i}", lane=lane, dedup_key=f"{lane}/{i}") for i in range(4)
        )
        await sharded.enqueue_in(60, f"{lane}/later", lane=lane)
    for lane, stop in zip(lanes, STOPS, strict=True):
        move = LaneMove(sharded, lane, to=1, batch=2)
        await move.run([step for step in stop if step != "half"])
        if "half" in stop:
            await move.copy_state()
            await move.import_batch(await move.export_batch())
        assert await sharded.move_lane(lane, to=1) is True
        assert await sharded.move_lane(lane, to=1) is False  # done: nothing to do
        [info] = await Queue.lanes(sharded.shards[1], [lane])
        assert info.limit == 3, stop  # the lane's ceiling came along, wherever it stopped
    source, target = sharded.shards[0], sharded.shards[1]
    counts = await Queue.counts(source)  # shard 0 alone (the sharded queue sums every shard)
    assert (counts.pending, counts.scheduled) == (0, 0)
    counts = await target.counts()
    assert (counts.pending, counts.scheduled) == (4 * len(lanes), len(lanes))
    for lane in lanes:  # the dedup keys came along
        again = await sharded.enqueue("x", lane=lane, dedup_key=f"{lane}/0")
        assert again.kind == "duplicate"
    ran = []
    while isinstance(jobs := await sharded.claim_batch(50), list):
        ran += [job.payload for job in jobs]
        await sharded.complete_each(jobs)
    assert sorted(ran) == sorted(f"{lane}/{i}" for lane in lanes for i in range(4))
    for lane in lanes:  # each lane's order came along
        assert [p for p in ran if p.startswith(f"{lane}/")] == [f"{lane}/{i}" for i in range(4)]


async def marks(sharded: ShardedQueue) -> list[Any]:
    """Every shard's move marks and the directory, as read."""
    reads = [("HGETALL", keys) for s in sharded.shards for keys in (s.keys.moved, s.keys.adopted)]
    return [
        *await sharded.wire.call_many(reads),
        await sharded.wire.call("HGETALL", sharded.keys.directory),
    ]


async def test_bad_arguments_are_refused_before_any_write(sharded: ShardedQueue) -> None:
    lane = lane_on(sharded.placement_map, 0)
    await sharded.enqueue("a", lane=lane)
    before = await marks(sharded)
    for kwargs, argument in (
        ({"to": 3}, "to"),
        ({"to": -1}, "to"),
        ({"to": True}, "to"),
        ({"to": 1, "batch": 0}, "batch"),
    ):
        with pytest.raises(InvalidArgument) as refused:
            await sharded.move_lane(lane, **kwargs)
        assert refused.value.argument == argument
    with pytest.raises(InvalidArgument) as refused:
        await sharded.move_lane("", to=1)
    assert refused.value.argument == "lane"
    assert await marks(sharded) == before
    for step in ("adopt", "freeze"):  # a move to shard 1 stopped after each of its first steps
        await LaneMove(sharded, lane, to=1).run([step])
        for to in (2, 0):
            with pytest.raises(InvalidArgument, match="finish that move first") as refused:
                await sharded.move_lane(lane, to=to)
            assert refused.value.argument == "to"
    assert await sharded.shards[2].wire.call("HGETALL", sharded.shards[2].keys.adopted) == {}
    assert await sharded.move_lane(lane, to=1) is True


async def test_a_job_cancelled_on_the_source_between_its_copy_and_its_delete_does_not_run(
    sharded: ShardedQueue,
) -> None:
    lane = lane_on(sharded.placement_map, 0)
    verdicts = await sharded.enqueue_many(Item(f"j{i}", lane=lane) for i in range(3))
    move = LaneMove(sharded, lane, to=1)
    await move.run(["adopt", "freeze", "drain"])
    jobs = await move.export_batch()
    await move.import_batch(jobs)
    assert await Queue.cancel(sharded.shards[0], verdicts[1].id) is not None  # on the source
    await move.drop_batch(jobs)
    assert await sharded.move_lane(lane, to=1) is True
    ran = []
    while isinstance(claimed := await sharded.claim_batch(10), list):
        ran += [job.payload for job in claimed]
        await sharded.complete_each(claimed)
    assert ran == ["j0", "j2"]
    target = sharded.shards[1]
    assert await target.wire.call("EXISTS", target.keys.job(verdicts[1].id)) == 0


async def test_an_ordered_lane_moves_with_its_holder_out_of_the_lane(sharded: ShardedQueue) -> None:
    await sharded.ordered(True)
    lane = lane_on(sharded.placement_map, 0)
    await sharded.enqueue_many(Item(f"j{i}", lane=lane) for i in range(3))
    head = await sharded.claim()
    assert not isinstance(head, Empty)
    assert await sharded.retry(head, delay=0.05, error="later") == "scheduled"  # still holds
    assert await sharded.move_lane(lane, to=1) is True
    ran = []
    async with asyncio.timeout(10):
        while len(ran) < 3:  # the holder first, once due (polled), then the rest in order
            claimed = await sharded.claim()
            if isinstance(claimed, Empty):
                await asyncio.sleep(0.01)
                await sharded.promote()
                continue
            assert claimed.shard == 1
            ran.append(claimed.payload)
            await sharded.complete(claimed)
    assert ran == ["j0", "j1", "j2"]


async def test_the_lanes_scheduled_jobs_are_found_a_window_of_the_schedule_at_a_time(
    sharded: ShardedQueue,
) -> None:
    lane = lane_on(sharded.placement_map, 0)
    other = lane_on(sharded.placement_map, 0, prefix="o")
    await sharded.enqueue_many(Item(f"o{i}", lane=other, delay=60) for i in range(1500))
    # Before and after the other lane's 1,500 in the schedule (a look reads 1,000 of it).
    early = [Item(f"e{i}", lane=lane, delay=30) for i in range(3)]
    late = [Item(f"l{i}", lane=lane, delay=90) for i in range(4)]
    await sharded.enqueue_many([*early, *late])
    assert await sharded.move_lane(lane, to=1, batch=2) is True
    source, target = sharded.shards[0], sharded.shards[1]
    assert (await Queue.counts(source)).scheduled == 1500
    assert (await target.counts()).scheduled == 7
    assert await source.wire.call("HEXISTS", source.keys.gscheduled, lane) == 0


async def test_a_job_cancelled_while_a_stopped_mover_left_it_on_both_shards_does_not_run(
    sharded: ShardedQueue,
) -> None:
    lane = lane_on(sharded.placement_map, 0)
    verdicts = await sharded.enqueue_many(Item(f"j{i}", lane=lane) for i in range(3))
    move = LaneMove(sharded, lane, to=1)
    await move.run(["adopt", "freeze", "drain"])
    await move.import_batch(await move.export_batch())  # stopped before the delete
    await sharded.cancel(verdicts[1].id)  # the queue cancels it on both shards
    await sharded.remove(verdicts[2].id)
    assert await sharded.move_lane(lane, to=1) is True
    claimed = await sharded.claim_batch(10)
    assert isinstance(claimed, list)
    assert [job.payload for job in claimed] == ["j0"]


async def test_a_lane_with_a_waiting_flow_parent_moves_only_once_it_joined_with_its_results(
    sharded: ShardedQueue,
) -> None:
    """A flow parent waiting for a child on another shard would join its lane on the source
    after the lane left: the move is refused while it waits (nothing written); once the child
    ended and the parent joined, the move carries it with its child's result."""
    placement = sharded.placement_map
    lane, other = lane_on(placement, 0, "p"), lane_on(placement, 1, "c")
    ids = await sharded.add_flow(Flow("parent", [Flow("child", lane=other)], lane=lane))
    with pytest.raises(InvalidArgument, match="waiting for their children") as refused:
        await sharded.move_lane(lane, to=2)
    assert refused.value.argument == "lane"
    source, target = sharded.shards[0], sharded.shards[2]
    assert await source.wire.call("HEXISTS", source.keys.moved, lane) == 0
    assert await target.wire.call("HEXISTS", target.keys.adopted, lane) == 0
    child = await sharded.claim()
    assert isinstance(child, Job)
    assert child.payload == "child"
    assert await sharded.complete(child, result={"seen": 7})
    await sharded.upkeep()  # shard 1 relays the child's outcome to shard 0
    assert await sharded.state(ids.id) == "pending"
    assert await sharded.move_lane(lane, to=2)
    parent = await sharded.claim()
    assert isinstance(parent, Job)
    assert (parent.id, parent.shard) == (ids.id, 2)
    assert (await sharded.children(ids.id)).results == {ids.children[0].id: {"seen": 7}}
    assert await source.wire.call("EXISTS", source.keys.flow_results(ids.id)) == 0


async def test_a_job_reaped_then_moved_is_found_where_it_is_now(sharded: ShardedQueue) -> None:
    """This process leased the job on shard 0; its lease was reaped and its lane moved to
    shard 1: reads and a cancel by id find it on shard 1 (not where this process leased it),
    so the cancel holds and the job does not run."""
    lane = lane_on(sharded.placement_map, 0, "r")
    verdict = await sharded.enqueue("doomed", lane=lane)
    leased = await sharded.claim_batch(1, lease=0.05)
    assert isinstance(leased, list)
    assert leased[0].shard == 0
    async with asyncio.timeout(5):
        while verdict.id not in (await sharded.reap()).recovered:
            await asyncio.sleep(0.02)  # the lease's own time passing: no event to wait on
    assert await sharded.move_lane(lane, to=1)
    assert await sharded.state(verdict.id) == "pending"
    assert (await sharded.cancel(verdict.id)).was == "pending"
    assert await sharded.state(verdict.id) in ("cancelled", "absent")
    assert isinstance(await sharded.claim(), Empty)


async def test_a_flow_childs_lane_moved_away_from_its_waiting_parent_still_frees_it(
    sharded: ShardedQueue,
) -> None:
    """The child's copy names the parent's shard: its end is relayed there, with its result."""
    parent_lane, child_lane = lanes_on(sharded.placement_map, [2])[0]
    flow = Flow("parent", lane=parent_lane, children=[Flow("child", lane=child_lane)])
    ids = await sharded.add_flow(flow)
    assert await sharded.move_lane(child_lane, to=2) is True  # the parent waits on shard 0
    child = await next_job(sharded)
    assert (child.payload, child.shard) == ("child", 2)
    await sharded.complete(child, result={"seen": 7})
    parent = await next_job(sharded)  # shard 2 relays the child's end to shard 0
    assert (parent.payload, parent.shard) == ("parent", 0)
    assert (await sharded.children(ids.id)).results == {child.id: {"seen": 7}}


async def test_a_joined_flow_parent_moved_away_from_its_own_waiting_parent_frees_it(
    sharded: ShardedQueue,
) -> None:
    """A chain on shard 0: the middle node, joined, moves with its child's result, and its
    own end is relayed to the top node left on shard 0."""
    top_lane, mid_lane = lanes_on(sharded.placement_map, [2])[0]
    leaf = Flow("leaf", lane=top_lane)
    ids = await sharded.add_flow(
        Flow("top", lane=top_lane, children=[Flow("mid", lane=mid_lane, children=[leaf])])
    )
    first = await next_job(sharded)
    assert first.payload == "leaf"
    await sharded.complete(first, result="from leaf")  # the middle node joins its lane
    assert await sharded.move_lane(mid_lane, to=2) is True
    mid = await next_job(sharded)
    assert (mid.payload, mid.shard) == ("mid", 2)
    assert (await sharded.children(mid.id)).results == {first.id: "from leaf"}
    await sharded.complete(mid, result="from mid")
    top = await next_job(sharded)
    assert (top.payload, top.shard) == ("top", 0)
    assert (await sharded.children(ids.id)).results == {mid.id: "from mid"}


async def test_a_flow_childs_lane_moved_to_its_parents_shard_tells_it_there_directly(
    sharded: ShardedQueue,
) -> None:
    """Its parent's shard named in its row no more, the child's end frees the parent at once
    (no outbox entry to relay: no upkeep runs)."""
    (child_lane,), (parent_lane,) = lanes_on(sharded.placement_map, [1, 1])
    await sharded.add_flow(Flow("parent", lane=parent_lane, children=[Flow("c", lane=child_lane)]))
    assert await sharded.move_lane(child_lane, to=1) is True
    child = await sharded.claim()
    assert isinstance(child, Job)
    assert (child.payload, child.shard) == ("c", 1)
    await sharded.complete(child)
    parent = await sharded.claim()
    assert isinstance(parent, Job)
    assert (parent.payload, parent.shard) == ("parent", 1)


async def next_job(sharded: ShardedQueue) -> Job:
    """The next job claimed, the shards' outboxes relayed (an upkeep) while none is found."""
    async with asyncio.timeout(5):
        while isinstance(job := await sharded.claim(), Empty):
            await sharded.upkeep()
    return job


async def test_a_flow_admitted_into_the_lane_before_its_freeze_is_carried_once_it_joined(
    sharded: ShardedQueue,
) -> None:
    """The parent waits for a child of its own lane: the drain does not wait for it (frozen on
    the source, the child would never run); the child runs on the target once it serves the
    lane, and the parent, joined on the source, is carried there with its child's result."""
    lane = lane_on(sharded.placement_map, 0, "w")
    move = LaneMove(sharded, lane, 2)
    assert await move.plan()
    await move.adopt()
    ids = await sharded.add_flow(Flow("parent", [Flow("child", lane=lane)], lane=lane))
    await move.freeze()
    await asyncio.wait_for(move.drain(), 5)
    await move.copy()
    await move.release()  # stopped here: a mover run again follows the parent, then records
    follow = asyncio.create_task(sharded.move_lane(lane, to=2))
    child = await next_job(sharded)
    assert (child.payload, child.shard) == ("child", 2)
    await sharded.complete(child, result="from child")
    parent = await next_job(sharded)  # relayed to shard 0, joined there, carried to shard 2
    assert (parent.payload, parent.shard) == ("parent", 2)
    assert parent.id == ids.id
    assert await asyncio.wait_for(follow, 5) is True
    assert (await sharded.children(ids.id)).results == {child.id: "from child"}
    assert sharded.placement_map.shard_of(lane) == 2
    assert await sharded.move_lane(lane, to=2) is False

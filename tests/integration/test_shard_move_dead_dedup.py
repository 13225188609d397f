"""What a lane move leaves on the lane's old shard, held to the lane's one shard
(docs/concepts/shards.md, "Dead jobs after a move" and "Dedup while a lane is held"): a dead job
reprocessed where its lane no longer lives runs where it does, and a dedup key sent while the
lane is held on its new shard finds the job still on the old one. Three shards on one server."""

from __future__ import annotations

from echomq import Item, Job
from echomq.engine import Empty, ShardedQueue, ShardedSyncQueue
from echomq.engine.lane_move import LaneMove
from echomq.engine.shards import grow_plan, lane_slot
from echomq.testing import lane_on


async def dead_job(queue: ShardedQueue, lane: str, payload: str, dedup: str) -> Job:
    await queue.enqueue(payload, lane=lane, dedup_key=dedup)
    job = await queue.claim()
    assert isinstance(job, Job)
    assert await queue.retry(job, max_attempts=1, error="boom") == "dead"
    return job


async def drained(queue: ShardedQueue) -> list[Job]:
    """Every job claimed (and completed) until the queue answers Empty."""
    jobs: list[Job] = []
    while not isinstance(job := await queue.claim(), Empty):
        jobs.append(job)
        await queue.complete(job)
    return jobs


async def test_a_dead_job_reprocessed_after_its_lane_moved_runs_on_the_lanes_new_shard(
    sharded: ShardedQueue,
) -> None:
    lane = lane_on(sharded.placement_map, 0)
    source, target = sharded.shards[0], sharded.shards[2]
    dead = await dead_job(sharded, lane, "d", "key-d")
    await sharded.enqueue("live", lane=lane)
    assert await sharded.move_lane(lane, to=2) is True
    assert await source.wire.call("ZSCORE", source.keys.dead, dead.id) is not None  # left there

    # A reprocess stopped between its copy and its delete: the copy is on shard 2 already.
    reply = await source.engine.reprocess_fenced(
        dead.id, sharded.placement_map.fence((lane,))._replace(epoch=0)
    )
    assert isinstance(reply, list)
    assert await source.wire.call("HGET", source.keys.job(dead.id), "state") == b"dead"
    _, row, log, ttl = reply
    args = ("in", sharded.placement_map.epoch, dead.id, lane_slot(lane), ttl, len(row), *row)
    assert (
        await sharded.scripts.run(
            target.wire,
            sharded.scripts.scripts["dead_move"],
            (target.keys.root, target.keys.gate),
            (*args, *log),
        )
        == 1
    )

    assert await sharded.reprocess(dead.id) is True  # the copy found, the row deleted here
    assert await source.wire.call("EXISTS", source.keys.job(dead.id)) == 0
    assert await source.wire.call("ZCARD", source.keys.dead) == 0
    assert await source.wire.call("EXISTS", source.keys.lane(lane)) == 0
    assert await target.wire.call("HGET", target.keys.job(dead.id), "state") == b"pending"
    # Its dedup key lives where the job does: a duplicate sent now is answered as one.
    assert (await sharded.enqueue("again", lane=lane, dedup_key="key-d")).kind == "duplicate"
    ran = await drained(sharded)
    assert [(job.payload, job.shard) for job in ran] == [("d", 2), ("live", 2)]
    assert ran[0].id == dead.id
    assert (await sharded.counts()).dead == 0


async def test_a_dead_job_reprocessed_after_a_grow_flipped_its_range_runs_on_the_new_shard(
    sharded: ShardedQueue,
) -> None:
    _, handoffs = grow_plan(sharded.placement_map.table, 3, 5)
    lane = next(
        f"g{i}"
        for i in range(100_000)
        if any(lo <= lane_slot(f"g{i}") < hi for lo, hi, *_ in handoffs)
    )
    home = sharded.placement_map.shard_of(lane)
    dead = await dead_job(sharded, lane, "d", "key-g")
    assert await sharded.grow(5) is True  # a lane with only a dead job: not moved
    new = sharded.placement_map.shard_of(lane)
    assert new != home
    await sharded.enqueue("fresh", lane=lane)

    assert await sharded.reprocess(dead.id) is True
    old = sharded.shards[home]
    assert await old.wire.call("EXISTS", old.keys.job(dead.id), old.keys.lane(lane)) == 0
    ran = await drained(sharded)
    assert sorted((job.payload, job.shard) for job in ran) == [("d", new), ("fresh", new)]


async def test_a_duplicate_sent_while_its_lane_is_held_on_the_new_shard_is_answered_as_one(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    away = lane_on(sharded.placement_map, 0)  # held on shard 2, its jobs still on shard 0
    home = lane_on(sharded.placement_map, 0, prefix="h")  # back to shard 0, its home: held there
    blocking = ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3)
    first, *_ = await sharded.enqueue_many(
        [
            Item("a1", lane=away, dedup_key="key-a"),
            Item("a2", lane=away),
            Item("h1", lane=home, dedup_key="key-h"),
            Item("h2", lane=home),
        ]
    )
    assert await sharded.move_lane(home, to=1) is True
    for lane, to in ((away, 2), (home, 0)):
        assert await LaneMove(sharded, lane, to).run(("adopt", "freeze")) is True

    # Sent between the freeze and the copy: the source's keys answer, from either producer.
    single = await sharded.enqueue("dup", lane=away, dedup_key="key-a")
    assert (single.kind, single.id) == ("duplicate", first.id)
    batch = await sharded.enqueue_many(
        [
            Item("dup", lane=home, dedup_key="key-h"),
            Item("new-a", lane=away, dedup_key="key-a2"),
            Item("new-h", lane=home, dedup_key="key-h2"),
        ]
    )
    assert [v.kind for v in batch] == ["duplicate", "enqueued", "enqueued"]
    assert blocking.enqueue("dup", lane=away, dedup_key="key-a").kind == "duplicate"
    assert [v.kind for v in blocking.enqueue_many([Item("dup", lane=home, dedup_key="key-h")])] == [
        "duplicate"
    ]
    # A new key is admitted on the held shard, and a duplicate of it is answered there.
    assert (await sharded.enqueue("dup", lane=away, dedup_key="key-a2")).kind == "duplicate"

    for lane, to in ((away, 2), (home, 0)):
        assert await LaneMove(sharded, lane, to).run() is True
    assert sorted(job.payload for job in await drained(sharded)) == [
        "a1",
        "a2",
        "h1",
        "h2",
        "new-a",
        "new-h",
    ]
    blocking.close()


async def test_a_held_lanes_keys_are_looked_for_on_its_source_alone(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    """Shard 0, the source here, is the sharded queue itself: its key and row are read as
    that one shard's. A kept result of the lane left on a third shard by an earlier move
    answers no duplicate, as neither before the hold nor after it."""
    lane = lane_on(sharded.placement_map, 2)
    kept = await ShardedQueue.connect(valkey_url, sharded.name, shards=3, result_ttl=60)
    blocking: ShardedSyncQueue | None = None
    try:
        for key in ("k1", "k2"):
            await kept.enqueue(key, lane=lane, dedup_key=key)
            job = await kept.claim()
            assert isinstance(job, Job)
            assert await kept.complete(job) is True
        assert await sharded.move_lane(lane, to=0) is True  # the kept results stay on shard 2
        blocking = ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3)
        assert await LaneMove(sharded, lane, 1).run(("adopt", "freeze")) is True

        assert (await sharded.enqueue("new", lane=lane, dedup_key="k1")).kind == "enqueued"
        assert blocking.enqueue("new", lane=lane, dedup_key="k2").kind == "enqueued"
        assert await LaneMove(sharded, lane, 1).run() is True
        assert [job.shard for job in await drained(sharded)] == [1, 1]
    finally:
        if blocking is not None:
            blocking.close()
        await kept.close()


async def test_a_copy_that_died_again_is_reprocessed_where_its_lane_lives(
    sharded: ShardedQueue,
) -> None:
    """A reprocess stopped between its copy and its delete, then the copy died too: the job is
    dead on both shards. The next reprocess revives it on the lane's shard and deletes the
    stale row where it first died (not: the stale row taken, the copy found dead and left)."""
    lane = lane_on(sharded.placement_map, 0)
    source, target = sharded.shards[0], sharded.shards[2]
    dead = await dead_job(sharded, lane, "d", "key-d")
    assert await sharded.move_lane(lane, to=2) is True
    reply = await source.engine.reprocess_fenced(dead.id, sharded.placement_map.fence((lane,)))
    assert isinstance(reply, list)
    _, row, log, ttl = reply
    args = ("in", sharded.placement_map.epoch, dead.id, lane_slot(lane), ttl, len(row), *row)
    keys = (target.keys.root, target.keys.gate)
    script = sharded.scripts.scripts["dead_move"]
    assert await sharded.scripts.run(target.wire, script, keys, (*args, *log)) == 1
    copy = await sharded.claim()
    assert isinstance(copy, Job)
    assert copy.id == dead.id
    assert await sharded.retry(copy, max_attempts=1, error="boom again") == "dead"

    assert await sharded.reprocess(dead.id) is True
    assert await target.wire.call("HGET", target.keys.job(dead.id), "state") == b"pending"
    assert await source.wire.call("EXISTS", source.keys.job(dead.id)) == 0
    assert [job.id for job in await drained(sharded)] == [dead.id]


async def test_an_id_sent_again_while_its_lane_is_held_is_answered_as_a_duplicate(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    """Admission is idempotent by id (SPEC): a job's id sent again while its lane is held on
    its new shard finds the job still on the old one, leased there at the freeze or pending,
    from either producer (not: admitted anew on the new shard, run a second time)."""
    lane = lane_on(sharded.placement_map, 0)
    blocking = ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3)
    leased, pending = await sharded.enqueue_many([Item("x", lane=lane), Item("y", lane=lane)])
    job = await sharded.claim()
    assert isinstance(job, Job)
    assert job.id == leased.id
    assert await LaneMove(sharded, lane, 2).run(("adopt", "freeze")) is True

    again = await sharded.enqueue("x again", lane=lane, id=leased.id)
    assert (again.kind, again.id) == ("duplicate", leased.id)
    batch = await sharded.enqueue_many([Item("y again", lane=lane, id=pending.id)])
    assert [v.kind for v in batch] == ["duplicate"]
    assert blocking.enqueue("x again", lane=lane, id=leased.id).kind == "duplicate"
    blocking_batch = blocking.enqueue_many([Item("y again", lane=lane, id=pending.id)])
    assert [v.kind for v in blocking_batch] == ["duplicate"]
    assert (await sharded.enqueue("new", lane=lane)).kind == "enqueued"  # a minted id: admitted

    await sharded.complete(job)
    assert await LaneMove(sharded, lane, 2).run() is True
    assert sorted(j.payload for j in await drained(sharded)) == ["new", "y"]
    blocking.close()

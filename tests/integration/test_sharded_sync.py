"""The blocking producer of a sharded queue (docs/concepts/shards.md, "One logical queue"):
``ShardedSyncQueue`` sends each job to its lane's shard, fenced, a batch's verdicts in input
order, a lane moved since its open followed by one more read of the directory; the task
layer's ``task.enqueue_sync`` from blocking code on an ``App(shards=3)``, and on an app not told
of the shards (``connect_sync_queue`` finds them by the directory)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from echomq import App, AppWorker, Item, Queue
from echomq.consumers.consumer import ConsumerOptions
from echomq.engine import ShardedQueue, ShardedSyncQueue, ShardMap, SyncQueue, connect_sync_queue
from echomq.engine.lane_move import LaneMove
from echomq.errors import InvalidArgument, LaneMoved
from echomq.testing import discard, lanes_on
from echomq.wire.blocking import Link


def flat_lanes(placement: ShardMap, per_shard: list[int], prefix: str) -> list[str]:
    """``per_shard[k]`` lane names that live on shard k, shard 0's first."""
    return [lane for part in lanes_on(placement, per_shard, prefix) for lane in part]


async def on_shard(queue: ShardedQueue, k: int, job_id: str) -> bool:
    shard = queue.shards[k]
    return bool(await shard.wire.call("EXISTS", shard.keys.job(job_id)))


async def test_a_blocking_producer_sends_each_lane_to_its_shard_in_order(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    placement = sharded.placement_map
    lanes = flat_lanes(placement, [2, 2, 2], "b")
    with ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3) as sync:
        solo = sync.enqueue("solo", lane=lanes[5])
        items = [Item(i, lane=lanes[i % 6]) for i in range(12)]
        items.insert(7, Item("bad", lane=lanes[1], priority=99))  # refused alone, in its place
        verdicts = sync.enqueue_many(items)
        assert [v.kind for v in verdicts] == ["enqueued"] * 7 + ["error"] + ["enqueued"] * 5
        assert sync.state(solo.id) == "pending"  # found on its shard by id
        info = sync.job(solo.id)
        assert info is not None
        assert info.payload == "solo"
    admitted = [v for v in verdicts if v.kind == "enqueued"]
    for verdict, item in zip(admitted, [it for it in items if it.payload != "bad"], strict=True):
        assert item.lane is not None
        assert await on_shard(sharded, placement.shard_of(item.lane), verdict.id)
    assert await on_shard(sharded, placement.shard_of(lanes[5]), solo.id)
    seen: dict[str, int] = {}
    while isinstance(jobs := await sharded.claim_batch(5), list):
        seen |= {job.id: job.shard for job in jobs}
        assert all(job.shard == placement.shard_of(job.lane) for job in jobs)
        await sharded.complete_each(jobs)
    assert set(seen) == {v.id for v in admitted} | {solo.id}
    assert set(seen.values()) == {0, 1, 2}
    with pytest.raises(InvalidArgument, match="has 3 shards: grow it to 4") as refused:
        ShardedSyncQueue.connect(valkey_url, sharded.name, shards=4)
    assert refused.value.argument == "shards"
    fewer = ShardedSyncQueue.connect(valkey_url, sharded.name, shards=2)  # a setting from
    try:  # before a grow: the directory's count is the truth
        assert fewer.placement_map.shards == 3
    finally:
        fewer.close()
    with pytest.raises(InvalidArgument, match="no shard directory"):
        ShardedSyncQueue.connect(valkey_url, sharded.name + "-none", shards=3)


async def test_a_batch_over_shards_on_one_server_is_one_write_and_one_round_trip(
    sharded: ShardedQueue, valkey_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shards share the server's socket: every shard's calls go out in one write before
    any reply is read (``Router.call_spread``), not one round trip per shard."""
    lanes = flat_lanes(sharded.placement_map, [2, 2, 2], "p")
    writes: list[int] = []
    send = Link.send

    def counted(link: Link, data: bytes) -> None:
        writes.append(data.count(b"EVALSHA"))
        send(link, data)

    with ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3) as sync:
        sync.enqueue("warm", lane=lanes[0])  # the socket and the id node, before counting
        monkeypatch.setattr(Link, "send", counted)
        verdicts = sync.enqueue_many([Item(i, lane=lanes[i % 6]) for i in range(30)])
        monkeypatch.undo()
    assert [v.kind for v in verdicts] == ["enqueued"] * 30
    assert writes == [3]  # one chunk per shard, the three in one write
    for i, verdict in enumerate(verdicts):
        assert await on_shard(sharded, sharded.placement_map.shard_of(lanes[i % 6]), verdict.id)


async def test_a_lane_moved_since_the_open_is_followed_by_one_read_of_the_directory(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    """The producer's map is read at open; the lane then moves from shard 1 to shard 2 (its
    overrides and epoch in the directory and the shards' fences). Shard 1 refuses the lane's
    items; the producer reads the directory again and sends them to shard 2."""
    created = sharded.placement_map
    lane, other = flat_lanes(created, [0, 2, 0], "m")
    with ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3) as sync:
        moved = ShardMap(created.tags, created.table, ((lane, 2),), epoch=2)
        for k in range(3):
            await sharded.wire.call_many(moved.fence_commands(k))
        one = sync.enqueue("one", lane=lane)
        assert sync.placement_map == created  # the lane went where shard 1 said: not placed
        await sharded.wire.call("HSET", sharded.keys.placed, lane, 2)
        await sharded.wire.call("HSET", sharded.keys.directory, "epoch", 2)
        many = sync.enqueue_many([Item(1, lane=lane), Item(2, lane=other), Item(3, lane=lane)])
        assert [v.kind for v in many] == ["enqueued"] * 3
        assert sync.placement_map == moved  # read again once
        assert sync.state(one.id) == "pending"
    for verdict in (one, many[0], many[2]):
        assert await on_shard(sharded, 2, verdict.id)
        assert not await on_shard(sharded, 1, verdict.id)
    assert await on_shard(sharded, 1, many[1].id)
    # A lane no shard takes (shard 2 neither owns nor adopts it) is refused, not looped on.
    await sharded.wire.call_many(created.fence_commands(2))
    with ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3) as sync:
        with pytest.raises(LaneMoved) as refused:
            sync.enqueue("lost", lane=lane)
        assert refused.value.lane == lane
        (verdict,) = sync.enqueue_many([Item("lost", lane=lane)])
        assert verdict.kind == "rejected"


async def test_enqueue_sync_from_blocking_code_on_a_sharded_app(
    valkey_url: str, queue_name: str
) -> None:
    app = App(valkey_url, queue=queue_name, shards=3)

    @app.task(lane="tenant")
    async def greet(tenant: str) -> str:
        return f"hello {tenant}"

    async with app:
        queue = app.queue()
        assert isinstance(queue, ShardedQueue)
        tenants = flat_lanes(queue.placement_map, [1, 1, 1], "a")
        sync = app.sync_queue()
        assert isinstance(sync, ShardedSyncQueue)
        handles = [greet.enqueue_sync(tenant) for tenant in tenants]
        assert all(h.verdict.kind == "enqueued" for h in handles)
        tallies = await AppWorker(app, options=ConsumerOptions(beat=0.1)).run_until_idle()
        assert tallies[queue_name].completed == 3
        results = await asyncio.to_thread(lambda: [h.result(timeout=5) for h in handles])
        assert results == [f"hello {t}" for t in tenants]
        await queue.pause()
        await queue.obliterate(force=True)
    await app.close()


async def test_enqueue_sync_on_an_app_not_told_of_the_shards_finds_them_by_the_directory(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    """``App.sync_queue`` of a queue not in ``app.shards`` reads its directory once: a sharded
    queue's jobs go to their lanes' shards, fenced, not all to shard 0."""
    app = App(valkey_url, queue=sharded.name)

    @app.task(lane="tenant")
    async def greet(tenant: str) -> str:
        return f"hello {tenant}"

    tenants = flat_lanes(sharded.placement_map, [1, 1, 1], "t")
    handles = [greet.enqueue_sync(tenant) for tenant in tenants]
    assert isinstance(app.sync_queue(), ShardedSyncQueue)
    assert [h.verdict.kind for h in handles] == ["enqueued"] * 3
    for k, handle in enumerate(handles):
        assert await on_shard(sharded, k, handle.verdict.id)
    assert app.sync_queue().state(handles[2].verdict.id) == "pending"
    await app.close()
    with connect_sync_queue(valkey_url, sharded.name + "-plain") as plain:
        assert type(plain) is SyncQueue  # no directory: the queue of one slot


async def test_dedup_job_names_the_job_a_key_maps_to_on_every_kind_of_queue(
    sharded: ShardedQueue, valkey_url: str, queue_name: str
) -> None:
    """``dedup_job``: the job a dedup key maps to now, on a plain queue and on a sharded one
    (the key lives on its lane's shard: every shard is read), async and blocking; None for a
    key that maps to none; a bad key refused naming the argument."""
    lanes = flat_lanes(sharded.placement_map, [0, 0, 1], "dj")  # a lane on shard 2
    verdict = await sharded.enqueue("x", lane=lanes[0], dedup_key="once-u1")
    assert await sharded.dedup_job("once-u1") == verdict.id
    assert await sharded.dedup_job("never") is None
    plain = await Queue.connect(valkey_url, f"{queue_name}-plain")
    try:
        mine = await plain.enqueue("y", dedup_key="once-u1")
        assert await plain.dedup_job("once-u1") == mine.id
        with pytest.raises(InvalidArgument, match="dedup key"):
            await plain.dedup_job("")
        with (
            ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3) as sync,
            SyncQueue.connect(valkey_url, plain.name) as plain_sync,
        ):
            assert sync.dedup_job("once-u1") == verdict.id
            assert sync.dedup_job("never") is None
            assert plain_sync.dedup_job("once-u1") == mine.id
            with pytest.raises(InvalidArgument, match="dedup key"):
                sync.dedup_job("")
    finally:
        await discard(plain)
        await plain.close()


async def test_a_sharded_queue_opened_by_name_keeps_the_connection_it_was_read_on(
    sharded: ShardedQueue, valkey_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``connect_sync_queue`` reads the directory on the plain queue's connection, and the
    sharded producer takes that connection over: one socket, not a second one opened after
    the first was closed."""
    lanes = flat_lanes(sharded.placement_map, [1, 1, 1], "o")
    opened: list[Link] = []
    init = Link.__init__

    def counted(link: Link, *args: Any, **kwargs: Any) -> None:
        opened.append(link)
        init(link, *args, **kwargs)

    monkeypatch.setattr(Link, "__init__", counted)
    with connect_sync_queue(valkey_url, sharded.name) as sync:
        assert isinstance(sync, ShardedSyncQueue)
        verdicts = sync.enqueue_many([Item(i, lane=lane) for i, lane in enumerate(lanes)])
        assert sync.state(verdicts[2].id) == "pending"
    monkeypatch.undo()
    assert len(opened) == 1
    assert [v.kind for v in verdicts] == ["enqueued"] * 3
    for k, verdict in enumerate(verdicts):
        assert await on_shard(sharded, k, verdict.id)


async def test_a_producer_two_moves_behind_follows_the_lane_into_a_move_in_progress(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    """A lane moved 0 → 1, then frozen on 1 for a move to 2: producers opened before either
    move send it to 0 (moved: the directory says 1), then to 1 (moved: 1 says 2), then to 2,
    which holds it (not: the second refusal raised to the caller)."""
    stale = await ShardedQueue.open(sharded.name, sharded.wire, shards=3, refresh=60)
    blocking = ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3)
    try:
        (lane,) = flat_lanes(sharded.placement_map, [1, 0, 0], "h")
        assert await sharded.move_lane(lane, to=1) is True
        assert await LaneMove(sharded, lane, 2).run(("adopt", "freeze")) is True
        one = await stale.enqueue("one", lane=lane)
        many = await stale.enqueue_many([Item("a", lane=lane), Item("b", lane=lane)])
        sync_one = blocking.enqueue("sync", lane=lane)
        sync_many = blocking.enqueue_many([Item("c", lane=lane)])
        ids = [one.id, *(v.id for v in many), sync_one.id, *(v.id for v in sync_many)]
        assert [await on_shard(sharded, 2, job_id) for job_id in ids] == [True] * 5
    finally:
        blocking.close()
        await stale.close()

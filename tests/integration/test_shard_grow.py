"""Growing a sharded queue, its first part (docs/concepts/shards.md, "Changing S"): shards
added empty with the ranges they take marked migrating on their source and importing on their
target, and the other processes' queues and consumers taking the new shards on. Three shards
grown to five on one server."""

from __future__ import annotations

import asyncio

import pytest

from echomq import Item, Job, Policy
from echomq.consumers.consumer import Consumer, ConsumerOptions
from echomq.engine import (
    Empty,
    Flow,
    Queue,
    ShardedQueue,
    ShardedSyncQueue,
    ShardMap,
    placement_lease,
)
from echomq.engine.lane_move import LaneMove
from echomq.engine.shards import Handoff, grow_plan, handed_to, lane_slot
from echomq.errors import InvalidArgument, PlacementBusy, Unsupported
from echomq.wire import Connector
from echomq.wire.url import ConnectionOptions


def handed(placement: ShardMap, grown: int) -> tuple[Handoff, ...]:
    return grow_plan(placement.table, placement.shards, grown)[1]


def lanes_handed(
    handoffs: tuple[Handoff, ...], count: int, prefix: str
) -> list[tuple[str, Handoff]]:
    """The first ``count`` lanes (``prefix0`` …) whose slot a handoff names, with it."""
    found: list[tuple[str, Handoff]] = []
    for i in range(100_000):
        lane, slot = f"{prefix}{i}", lane_slot(f"{prefix}{i}")
        handoff = next((h for h in handoffs if h[0] <= slot < h[1]), None)
        if handoff is not None:
            found.append((lane, handoff))
            if len(found) == count:
                return found
    raise AssertionError("too few lanes")


async def parked(queue: ShardedQueue) -> None:
    """Poll until one client blocks on the server (the worker, parked on its wake lists)."""
    async with asyncio.timeout(5):
        while b"blocked_clients:1\r" not in await queue.wire.call("INFO", "clients"):
            await asyncio.sleep(0.005)


async def lane_jobs(queue: ShardedQueue, shard: int, lane: str) -> int:
    keys = queue.shards[shard].keys
    return int(await queue.wire.call("ZCARD", keys.lane(lane)))


async def test_added_shards_take_new_lanes_of_their_ranges_and_existing_lanes_stay(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    stale = await ShardedQueue.open(sharded.name, sharded.wire, shards=3, refresh=60)
    blocking = ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3)
    handoffs = handed(sharded.placement_map, 5)
    found = lanes_handed(handoffs, 5, "g")
    (old, (_, _, old_from, _)), (new, (_, _, new_from, new_to)), (late, late_h) = found[:3]
    synced, synced_h = found[3]
    busy, busy_h = found[4]
    kept = next(f"k{i}" for i in range(10_000) if sharded.placement_map.shard_of(f"k{i}") == 1)
    await sharded.enqueue("busy0", lane=busy)
    leased = await sharded.claim()  # its lane's one job, leased: nothing pending on the lane
    assert isinstance(leased, Job)
    assert leased.payload == "busy0"
    await sharded.enqueue_many(Item(f"old{i}", lane=old) for i in range(2))
    await sharded.concurrency(8)  # a queue-wide budget: the new shards start with no quota

    for bad in (True, "5", 0, 257):
        with pytest.raises(InvalidArgument) as refused:
            await sharded.add_shards(bad)  # type: ignore[arg-type]
        assert refused.value.argument == "shards"
    with pytest.raises(Unsupported):
        await sharded.add_shards(2)
    assert await sharded.add_shards(3) is False
    before = await sharded.wire.call("HGETALL", sharded.keys.directory)
    for bad_batch in (0, 10_001, "9"):
        with pytest.raises(InvalidArgument) as refused:
            await sharded.grow(5, batch=bad_batch)  # type: ignore[arg-type]
        assert refused.value.argument == "batch"
    assert await sharded.wire.call("HGETALL", sharded.keys.directory) == before  # untouched
    assert len(sharded.shards) == 3
    assert await sharded.add_shards(5) is True

    directory = await sharded.wire.call("HGETALL", sharded.keys.directory)
    assert directory[b"count"] == b"5"
    assert directory[b"epoch"] == b"2"
    assert directory[b"state"] == b"growing"
    assert len(sharded.shards) == 5
    for k in (3, 4):
        keys = sharded.shards[k].keys
        meta = await sharded.wire.call("HGETALL", keys.meta)
        assert meta[b"shard"] == str(k).encode()
        assert meta[b"noquota"] == b"c"
        assert b"concurrency" not in meta
    slot = lane_slot(new)
    source, target = sharded.shards[new_from].keys, sharded.shards[new_to].keys
    assert await sharded.wire.call("GETBIT", source.owns, slot) == 0
    assert await sharded.wire.call("GETRANGE", source.migrating, slot, slot) == bytes([new_to])
    assert await sharded.wire.call("GETBIT", target.importing, slot) == 1
    with pytest.raises(InvalidArgument):
        await sharded.add_shards(6)  # another grow while this one is in progress
    assert await sharded.add_shards(5) is True  # the same one: its marks written again

    # A new lane of a handed range starts on its new shard; one with jobs stays on its source;
    # a lane of a range kept stays too. The stale producer is refused by the source, reads the
    # directory and sends it on.
    await sharded.enqueue("new", lane=new)
    await stale.enqueue("late", lane=late)
    await sharded.enqueue("old2", lane=old)
    await stale.enqueue("kept", lane=kept)
    await sharded.enqueue("busy1", lane=busy)  # held by its leased job: admitted on its source
    await asyncio.to_thread(blocking.enqueue, "synced", lane=synced)  # a stale blocking producer
    assert len(blocking.shards) == 5
    blocking.close()
    assert len(stale.shards) == 5
    assert await lane_jobs(sharded, new_to, new) == 1
    assert await lane_jobs(sharded, new_from, new) == 0
    assert await lane_jobs(sharded, late_h[3], late) == 1
    assert await lane_jobs(sharded, late_h[2], late) == 0
    assert await lane_jobs(sharded, old_from, old) == 3
    assert await lane_jobs(sharded, 1, kept) == 1
    assert await lane_jobs(sharded, synced_h[3], synced) == 1
    assert await lane_jobs(sharded, busy_h[2], busy) == 1
    await sharded.complete(leased)

    # Quota 0 on the new shards (their ``noquota``) until a rebalancer round (a worker's
    # upkeep runs them) gives them their share: this queue's rebalancer knows them now.
    assert len(sharded.rebalancer.shards) == 5
    assert await sharded.rebalancer.round()
    claimed: list[Job] = []
    while not isinstance(job := await sharded.claim(), Empty):
        claimed.append(job)
        await sharded.complete(job)
    assert sorted(job.payload for job in claimed) == sorted(
        ["old0", "old1", "old2", "new", "late", "kept", "synced", "busy1"]
    )
    assert {job.shard for job in claimed if job.payload in ("new", "late")} == {new_to, late_h[3]}
    await stale.close()


async def test_another_process_takes_the_new_shards_on_at_its_next_refresh(
    sharded: ShardedQueue,
) -> None:
    worker = await ShardedQueue.open(sharded.name, sharded.wire, shards=3, refresh=0.05)
    seen: list[str] = []
    done = asyncio.Event()
    wanted = 0

    async def handler(job: Job) -> None:
        seen.append(job.payload)
        if len(seen) == wanted:
            done.set()

    # A beat and an idle upkeep longer than the test waits (10 s at most): only wake tokens
    # make it claim, so each wait below ending in time is the proof.
    options = ConsumerOptions(beat=60.0, idle_upkeep=60.0, concurrency=2)
    consumer = Consumer(worker, handler, options)
    serving = asyncio.ensure_future(consumer.run())
    handoffs = handed(sharded.placement_map, 5)
    first = [lane for lane, h in lanes_handed(handoffs, 40, "n") if h[3] == 3][:2]
    later = [lane for lane, h in lanes_handed(handoffs, 40, "m") if h[3] == 4][:2]
    try:
        wanted = 1
        await sharded.enqueue("w", lane="warm")  # handled: the worker is parked after it
        async with asyncio.timeout(10):
            await done.wait()
        assert len(worker.shards) == 3
        await parked(sharded)
        done.clear()
        await sharded.add_shards(5)  # wakes the parked worker: it reads the directory
        async with asyncio.timeout(5):
            while len(worker.shards) < 5:
                await asyncio.sleep(0.005)
        await parked(sharded)
        wanted = 5
        await sharded.enqueue_many(Item(f"a{i}", lane=lane) for i, lane in enumerate(first * 2))
        assert await lane_jobs(sharded, 3, first[0]) == 2
        async with asyncio.timeout(10):
            await done.wait()  # the worker took shard 3 on and heard its wake list
        assert len(worker.shards) == 5
        assert len(worker.wake_keys) == 5
        # Parked now on every shard's wake list: a job on shard 4 wakes it before its beat.
        await parked(sharded)
        done.clear()
        wanted = 7
        await sharded.enqueue_many(Item(f"b{i}", lane=lane) for i, lane in enumerate(later))
        async with asyncio.timeout(10):
            await done.wait()
    finally:
        consumer.stop()
        await serving
    assert sorted(seen) == ["a0", "a1", "a2", "a3", "b0", "b1", "w"]
    await worker.close()


async def test_grow_moves_the_lanes_a_source_holds_then_flips_the_ranges(
    sharded: ShardedQueue,
) -> None:
    stale = await ShardedQueue.open(sharded.name, sharded.wire, shards=3, refresh=60)
    before = sharded.placement_map
    table, handoffs = grow_plan(before.table, 3, 5)
    found = lanes_handed(handoffs, 3, "h")
    (held, held_h), (limited, limited_h), (fresh, fresh_h) = found
    await sharded.enqueue_many(Item(f"held{i}", lane=held) for i in range(3))
    await sharded.enqueue_in(0.05, "delayed", lane=held)
    await sharded.lane(limited).limit(1)  # settings alone: moved with the lane
    assert await sharded.add_shards(5) is True  # a grow that stopped after its first step
    assert await sharded.grow(5) is True  # resumed from the directory's plan

    directory = await sharded.wire.call("HGETALL", sharded.keys.directory)
    assert b"grow" not in directory
    assert b"state" not in directory
    assert ShardMap.from_stored(directory).table == table
    for k, shard in enumerate(sharded.shards):
        assert await sharded.wire.call("GET", shard.keys.owns) == sharded.placement_map.owns_bitmap(
            k
        )
        assert not await sharded.wire.call("EXISTS", shard.keys.migrating, shard.keys.importing)
    assert await lane_jobs(sharded, held_h[3], held) == 3
    assert await lane_jobs(sharded, held_h[2], held) == 0
    assert (await sharded.lanes([limited]))[0].limit == 1
    assert sharded.keys_of(limited) == sharded.shards[limited_h[3]].keys
    await stale.enqueue("fresh", lane=fresh)  # the stale map: refused, the directory read again
    assert await lane_jobs(sharded, fresh_h[3], fresh) == 1
    assert await sharded.grow(5) is False

    claimed: list[str] = []
    async with asyncio.timeout(5):
        while len(claimed) < 5:
            job = await sharded.claim()
            if isinstance(job, Job):
                claimed.append(job.payload)
                await sharded.complete(job)
            else:
                await sharded.promote()  # the delayed job falls due within 50 ms
    assert sorted(claimed) == ["delayed", "fresh", "held0", "held1", "held2"]
    assert claimed.index("held0") < claimed.index("held1") < claimed.index("held2")
    await stale.close()


async def test_a_flow_child_handed_on_by_a_grow_still_frees_its_parent_left_on_the_source(
    sharded: ShardedQueue,
) -> None:
    """The grow moves the child's lane and keeps the parent's: the child's end is relayed to
    the parent's shard."""
    handoffs = handed(sharded.placement_map, 5)
    [(child_lane, (_, _, source, target))] = lanes_handed(handoffs, 1, "c")
    parent_lane = next(
        lane
        for lane in (f"p{i}" for i in range(100_000))
        if sharded.placement_map.shard_of(lane) == source
        and not any(h[0] <= lane_slot(lane) < h[1] for h in handoffs)
    )
    flow = Flow("parent", lane=parent_lane, children=[Flow("child", lane=child_lane)])
    await sharded.add_flow(flow)
    assert await sharded.grow(5) is True
    ran: list[tuple[str, int]] = []
    async with asyncio.timeout(5):
        while len(ran) < 2:
            job = await sharded.claim()
            if isinstance(job, Job):
                ran.append((job.payload, job.shard))
                await sharded.complete(job)
            else:
                await sharded.upkeep()  # the child's end, relayed to the parent's shard
    assert ran == [("child", target), ("parent", source)]


async def test_a_handed_lanes_settings_reach_its_target_before_the_marks(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    blocking = ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3)  # of 3 shards
    handoffs = handed(sharded.placement_map, 5)
    (capped, (_, _, _, to)), (paused, _) = lanes_handed(handoffs, 2, "s")
    await sharded.lane(capped).limit(1)
    await sharded.lane(paused).pause()
    await sharded.add_shards(5)  # no job of either on its source: both start on their target
    await sharded.enqueue_many(Item(f"c{i}", lane=capped) for i in range(2))
    await sharded.enqueue("p0", lane=paused)
    assert await lane_jobs(sharded, to, capped) == 2
    first = await sharded.claim()
    assert isinstance(first, Job)
    assert first.payload == "c0"
    assert isinstance(await sharded.claim(), Empty)  # ceiling 1 and the pause hold there

    # Until the flip a setter writes both shards: its source (whose copy the move carries)
    # and the target that serves the lane's new jobs meanwhile.
    await sharded.lane(paused).resume()
    await sharded.apply_policies({capped: Policy(limit=2)})
    claimed = [await sharded.claim(), await sharded.claim()]
    assert sorted(j.payload for j in claimed if isinstance(j, Job)) == ["c1", "p0"]
    blocking.configure_lane(capped, cap=7)  # the blocking producer's setter, as stale as it is
    assert [info.cap for info in await Queue.lanes(sharded.shards[to], [capped])] == [7]
    blocking.close()
    assert await sharded.grow(5) is True
    assert (await sharded.lanes([capped]))[0].limit == 2
    assert (await sharded.lanes([paused]))[0].paused is False


async def test_two_growers_and_a_mover_are_kept_apart_by_the_placement_lease(
    sharded: ShardedQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(placement_lease, "LEASE_MS", 300)  # extended every 100 ms
    other = await ShardedQueue.open(sharded.name, sharded.wire, shards=3)  # another process
    (lane, (_, _, source, target)) = lanes_handed(handed(sharded.placement_map, 5), 1, "m")[0]
    await sharded.enqueue_many(Item(f"m{i}", lane=lane) for i in range(2))
    leased = await sharded.claim()  # its move drains this lease: the grow waits meanwhile
    assert isinstance(leased, Job)
    growing = asyncio.create_task(sharded.grow(5))
    async with asyncio.timeout(5):  # the grow's move froze the lane: it holds the lease
        while not await sharded.wire.call("HEXISTS", sharded.shards[source].keys.moved, lane):
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.4)  # past the lease's time to live: the holder extends it
    with pytest.raises(PlacementBusy) as busy:
        await other.grow(5)
    assert busy.value.holder.startswith("growth to 5 shards (host ")
    with pytest.raises(PlacementBusy):
        await other.move_lane(lane, to=(source + 1) % 3)
    await sharded.complete(leased)
    assert await growing is True
    assert await other.grow(5) is False  # nothing left to do
    held = [await lane_jobs(sharded, k, lane) for k in range(5)]
    assert held == [1 if k == target else 0 for k in range(5)]
    await other.close()


async def test_a_dead_holders_lease_blocks_only_until_it_expires(sharded: ShardedQueue) -> None:
    await sharded.wire.call("SET", sharded.keys.placing, "t0 a dead grower", "PX", 200)
    with pytest.raises(PlacementBusy) as busy:
        await sharded.move_lane("x", to=1)
    assert busy.value.holder == "a dead grower"
    assert 0 < busy.value.expires_in <= 0.2
    async with asyncio.timeout(2):
        while True:
            try:
                assert await sharded.grow(4) is True
                break
            except PlacementBusy:
                await asyncio.sleep(0.02)
    assert not await sharded.wire.call("EXISTS", sharded.keys.placing)  # released at the end


async def test_a_grow_whose_lease_was_taken_over_stops_and_is_resumed(
    sharded: ShardedQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(placement_lease, "LEASE_MS", 300)
    (lane, (_, _, source, target)) = lanes_handed(handed(sharded.placement_map, 5), 1, "t")[0]
    await sharded.enqueue("t0", lane=lane)
    leased = await sharded.claim()
    assert isinstance(leased, Job)
    growing = asyncio.create_task(sharded.grow(5))
    async with asyncio.timeout(5):
        while not await sharded.wire.call("HEXISTS", sharded.shards[source].keys.moved, lane):
            await asyncio.sleep(0.01)
    await sharded.wire.call("SET", sharded.keys.placing, "t1 a newer holder", "PX", 5000)
    await asyncio.wait([growing], timeout=2)  # stopped at its next extension, mid-drain
    lost = growing.exception() if growing.done() else None
    assert isinstance(lost, PlacementBusy)
    assert lost.holder == "a newer holder"
    assert await sharded.wire.call("GET", sharded.keys.placing) == b"t1 a newer holder"
    await sharded.wire.call("DEL", sharded.keys.placing)  # that holder is done
    await sharded.complete(leased)
    assert await sharded.grow(5) is True
    assert sharded.keys_of(lane) == sharded.shards[target].keys
    counts = await sharded.counts()
    assert (counts.pending, counts.active, counts.completed) == (0, 0, 1)


async def test_a_grow_stopped_in_a_lanes_move_finishes_that_move_when_resumed(
    sharded: ShardedQueue,
) -> None:
    """A grow stopped after one of its moves froze its lane (the source's ``moved`` names the
    target, which holds the lane adopted) resumes that move before the flip: the lane is
    released on its target and its jobs run there (not: skipped as gone, flipped, its pending
    job frozen on the source and the lane held on the target for good)."""
    (lane, (_, _, _, target)) = lanes_handed(handed(sharded.placement_map, 5), 1, "r")[0]
    await sharded.enqueue("r0", lane=lane)
    assert await sharded.add_shards(5) is True
    assert await LaneMove(sharded, lane, target).run(("adopt", "freeze")) is True
    assert await sharded.grow(5) is True
    assert sharded.keys_of(lane) == sharded.shards[target].keys
    await sharded.enqueue("r1", lane=lane)
    ran: list[tuple[str, int]] = []
    while not isinstance(job := await sharded.claim(), Empty):
        ran.append((job.payload, job.shard))
        await sharded.complete(job)
    assert ran == [("r0", target), ("r1", target)]


async def test_a_holder_whose_extension_hangs_is_stopped_when_its_lease_may_lapse(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    """An extension that does not answer (here: writes paused on the server) leaves the lease
    to lapse on the server's clock while the holder works on: another move or grow may take it
    then. The holder is stopped once its lease may have lapsed, not when the extension's call
    gives up (its call timeout, seconds later) or, answered late, finds it held again."""
    lease = placement_lease.PlacementLease(sharded, "a hung holder", ttl_ms=200)
    admin = await Connector(ConnectionOptions.from_url(valkey_url), version_fence=None).connect()
    loop = asyncio.get_running_loop()
    held_at = loop.time()

    async def work_while_paused() -> None:
        nonlocal held_at
        async with lease:
            held_at = loop.time()
            assert await admin.call("CLIENT", "PAUSE", 700, "WRITE") == b"OK"
            await asyncio.sleep(1.0)

    try:
        with pytest.raises(PlacementBusy):
            await work_while_paused()
        assert loop.time() - held_at < 0.45
    finally:
        await admin.call("CLIENT", "UNPAUSE")
        await admin.close()


async def test_a_lane_held_from_a_shard_a_producer_has_not_heard_of_is_admitted(
    sharded: ShardedQueue, valkey_url: str
) -> None:
    """A producer that has not heard of a grow sends a lane to its old home, which holds it for
    a move from a new shard (``EMQHELD 4``): the directory is read again for that shard, whose
    keys are looked at (not: an ``IndexError`` from the producer's list of 3 shards)."""
    stale = await ShardedQueue.open(sharded.name, sharded.wire, shards=3, refresh=60)
    blocking = ShardedSyncQueue.connect(valkey_url, sharded.name, shards=3)
    handoffs = handed(sharded.placement_map, 5)
    lane = next(
        f"s{i}"
        for i in range(10_000)
        if sharded.placement_map.shard_of(f"s{i}") == 1 and handed_to(handoffs, 1, f"s{i}") is None
    )
    try:
        await sharded.enqueue("first", lane=lane, dedup_key="k")
        assert await sharded.grow(5) is True
        assert await sharded.move_lane(lane, to=4) is True
        assert await LaneMove(sharded, lane, 1).run(("adopt", "freeze")) is True  # held on 1

        assert (await stale.enqueue("dup", lane=lane, dedup_key="k")).kind == "duplicate"
        assert blocking.enqueue("dup", lane=lane, dedup_key="k").kind == "duplicate"
        assert [v.kind for v in await stale.enqueue_many([Item("new", lane=lane)])] == ["enqueued"]
        assert [v.kind for v in blocking.enqueue_many([Item("new", lane=lane)])] == ["enqueued"]
    finally:
        blocking.close()
        await stale.close()


async def test_a_setter_that_read_the_directory_before_a_grow_writes_the_target_too(
    sharded: ShardedQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane setter reads the directory, then writes: a grow that began between the two
    copied the lane's settings to its target before the write reached the source. The write
    is not lost there (here: a resume; the lane, with nothing on its source, is not moved by
    the grow and would stay paused on its new shard for good)."""
    (lane, (_, _, _, to)) = lanes_handed(handed(sharded.placement_map, 5), 1, "p")[0]
    await sharded.lane(lane).pause()
    read, go = asyncio.Event(), asyncio.Event()
    lane_shards = sharded.lane_shards

    async def read_then_wait(name: str) -> list[Queue]:
        shards = await lane_shards(name)
        if not read.is_set():  # the setter's first read: the grow starts after it
            read.set()
            await go.wait()
        return shards

    monkeypatch.setattr(sharded, "lane_shards", read_then_wait)
    resuming = asyncio.create_task(sharded.lane(lane).resume())
    await read.wait()
    other = await ShardedQueue.open(sharded.name, sharded.wire, shards=3)
    assert await other.add_shards(5) is True  # the pause copied to the target
    go.set()
    assert await resuming is True
    assert await other.grow(5) is True
    assert [info.paused for info in await Queue.lanes(other.shards[to], [lane])] == [False]
    await other.enqueue("p0", lane=lane)
    job = await other.claim()
    assert isinstance(job, Job)
    assert job.shard == to
    await other.close()


async def test_a_grow_finishes_a_stopped_move_of_a_handed_lane_toward_another_shard(
    sharded: ShardedQueue,
) -> None:
    """A ``move_lane`` of a lane of a handed range, toward a shard that is not the range's
    target, stopped after its freeze (its lease lapsed): the grow finishes it where it was
    going before the flip (not: skipped, flipped, its job frozen on the source for good)."""
    (lane, (_, _, source, _)) = lanes_handed(handed(sharded.placement_map, 5), 1, "m")[0]
    other = next(k for k in range(3) if k != source)
    await sharded.enqueue("m0", lane=lane)
    assert await sharded.add_shards(5) is True
    assert await LaneMove(sharded, lane, other).run(("adopt", "freeze")) is True
    assert await sharded.grow(5) is True
    assert sharded.keys_of(lane) == sharded.shards[other].keys
    await sharded.enqueue("m1", lane=lane)
    ran: list[tuple[str, int]] = []
    while not isinstance(job := await sharded.claim(), Empty):
        ran.append((job.payload, job.shard))
        await sharded.complete(job)
    assert ran == [("m0", other), ("m1", other)]  # other is an old shard: never the target


async def test_policies_applied_across_the_start_of_a_grow_reach_its_target(
    sharded: ShardedQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``apply_policies`` reads the directory, then writes: a grow that began between the two
    copied the lane's old policy to its target before the write reached the source. The
    directory is read again after the writes and the target written too (here: the lane's
    policy cleared, so nothing of it stays on its source for the grow to move; not: the lane
    runs under its old ceiling on its new shard for good)."""
    (lane, (_, _, _, to)) = lanes_handed(handed(sharded.placement_map, 5), 1, "q")[0]
    await sharded.apply_policies({lane: Policy(limit=1)})
    read, go = asyncio.Event(), asyncio.Event()
    grow_handoffs = sharded.grow_handoffs

    async def read_then_wait() -> tuple[Handoff, ...]:
        handoffs = await grow_handoffs()
        if not read.is_set():  # the first read: the grow starts after it
            read.set()
            await go.wait()
        return handoffs

    monkeypatch.setattr(sharded, "grow_handoffs", read_then_wait)
    applying = asyncio.create_task(sharded.apply_policies({}))  # the lane's cleared
    await read.wait()
    other = await ShardedQueue.open(sharded.name, sharded.wire, shards=3)
    assert await other.add_shards(5) is True  # the old policy copied to the target
    go.set()
    await applying
    assert await other.grow(5) is True
    assert lane not in (await Queue.policies(other.shards[to])).lanes
    await other.close()


async def test_a_grow_finishes_a_move_of_a_handed_lane_stopped_after_its_adopt(
    sharded: ShardedQueue,
) -> None:
    """A ``move_lane`` toward another shard stopped after its first step (the lane held
    there, not yet frozen on the source): the grow finishes it, as one stopped later."""
    (lane, (_, _, source, _)) = lanes_handed(handed(sharded.placement_map, 5), 1, "a")[0]
    other = next(k for k in range(3) if k != source)
    await sharded.enqueue("a0", lane=lane)
    assert await sharded.add_shards(5) is True
    assert await LaneMove(sharded, lane, other).run(("adopt",)) is True
    assert await sharded.grow(5) is True
    job = await sharded.claim()
    assert isinstance(job, Job)
    assert job.payload == "a0"

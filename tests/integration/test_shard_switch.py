"""Changing a queue's shard count today, by drain and switch (docs/concepts/shards.md,
"Changing S today"): producers move to a queue of the new shape under a new name, workers serve
both, and the old queue is deleted only once it holds no work — its leased, delayed and
retrying jobs included. Nothing is lost, nothing runs twice."""

from __future__ import annotations

from collections import Counter

from echomq import App, AppWorker, Item, Queue
from echomq.consumers.consumer import ConsumerOptions
from echomq.engine import Empty, ShardedQueue
from echomq.testing import discard


async def drained(queue: Queue) -> bool:
    """True when ``queue`` holds no job that will still run: none pending, leased, scheduled
    (delayed, retrying, deferred) or waiting for flow children. Dead letters are not work: they
    stay until reprocessed (on the old queue) or deleted."""
    counts = await queue.counts()
    return counts.pending + counts.active + counts.scheduled + counts.waiting == 0


async def serve(queue: Queue, ran: Counter[str]) -> None:
    """A worker's turn: claim what is due and complete it."""
    while isinstance(jobs := await queue.claim_batch(10), list):
        ran.update(job.payload for job in jobs)
        await queue.complete_each(jobs)


async def test_growing_by_drain_and_switch_loses_nothing_and_runs_nothing_twice(
    valkey_url: str, queue_name: str
) -> None:
    old = await ShardedQueue.connect(valkey_url, queue_name, shards=2)
    new = await ShardedQueue.connect(valkey_url, f"{queue_name}-v2", shards=4)
    try:
        await old.enqueue_many(Item(f"old-{i}", lane=f"t{i % 5}") for i in range(40))
        await old.enqueue_in(0.3, "old-later", lane="t1")  # delayed: the old queue still owes it
        leased = await old.claim_batch(3)  # in flight when the switch happens
        assert isinstance(leased, list)
        # -- the switch: every producer now writes to the new queue --
        await new.enqueue_many(Item(f"new-{i}", lane=f"t{i % 5}") for i in range(40))
        ran: Counter[str] = Counter(job.payload for job in leased)
        await old.complete_each(leased)
        # -- workers serve both until the old one holds nothing that will still run --
        await serve(old, ran)
        await serve(new, ran)
        assert not await drained(old)  # the delayed job is still owed: not yet
        while not await drained(old):
            claimed = await old.claim()
            if isinstance(claimed, Empty):
                await old.promote()  # what a worker's upkeep does each beat
                continue
            ran[claimed.payload] += 1
            await old.complete(claimed)
        await old.pause()
        await old.obliterate()  # refuses a queue with leased jobs: there are none
        expected = {f"old-{i}" for i in range(40)} | {"old-later"} | {f"new-{i}" for i in range(40)}
        assert set(ran) == expected
        assert set(ran.values()) == {1}
        for pattern in (f"emq:{{{queue_name}}}:*", f"emq:{{{queue_name}~*"):
            assert await old.wire.call("KEYS", pattern) == []  # every shard, the directory
        assert await drained(new)
    finally:
        await new.pause()
        await new.obliterate(force=True)
        await old.close()
        await new.close()


async def test_an_app_not_told_of_the_shards_finds_them_by_the_directory(
    valkey_url: str, queue_name: str
) -> None:
    """A queue made sharded by one process is served whole by an app that was not given
    ``shards=``: its worker claims on every shard, not on shard 0 alone."""
    sharded = await ShardedQueue.connect(valkey_url, queue_name, shards=3)
    app = App(valkey_url, queue=queue_name)

    @app.task(lane="tenant")
    async def greet(tenant: str) -> str:
        return f"hello {tenant}"

    try:
        tenants = [f"a{i}" for i in range(9)]
        assert {sharded.placement_map.shard_of(t) for t in tenants} == {0, 1, 2}
        async with app:
            assert isinstance(app.queue(), ShardedQueue)
            handles = [await greet.enqueue(tenant) for tenant in tenants]
            tallies = await AppWorker(app, options=ConsumerOptions(beat=0.1)).run_until_idle()
            assert tallies[queue_name].completed == 9
            assert [await h.result(timeout=5) for h in handles] == [f"hello {t}" for t in tenants]
        for k, shard in enumerate(sharded.shards):  # each job ran on its lane's shard
            done = (await Queue.counts(shard)).completed
            assert done == sum(1 for t in tenants if sharded.placement_map.shard_of(t) == k)
    finally:
        await app.close()
        await discard(sharded)

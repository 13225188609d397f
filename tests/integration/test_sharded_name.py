"""A plain queue on a sharded queue's name (docs/concepts/shards.md, "Using a sharded queue
today"): it would be the queue's shard 0 alone, with no fence. ``Queue.connect`` refuses it at
connect; one built by hand, opened before the queue was sharded, or a ``SyncQueue``, is refused
by the engine itself (EMQSHARDED, :class:`QueueSharded`) at its first enqueue, batch or claim,
before any write (and at its first flow or reassign, by one read of the directory). A queue of
one slot, and the sharded queue's own shard 0, are not touched by it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from echomq import Item, Job, Queue, SyncQueue
from echomq.engine import Flow, JobOptions, ShardedQueue
from echomq.errors import QueueSharded, Unsupported
from echomq.testing import discard, lanes_on


async def contents(queue: Queue) -> dict[bytes, Any]:
    """Every key of the queue's name and of its shards (``emq:{q}…``, ``emq:{q~k}…``) with
    what it holds (DUMP), to compare before and after."""
    keys: list[bytes] = []
    for pattern in (f"emq:{{{queue.name}}}*", f"emq:{{{queue.name}~*"):
        cursor: Any = b"0"
        while True:
            cursor, batch = await queue.wire.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            keys += batch
            if cursor in (b"0", 0, "0"):
                break
    dumps = await queue.wire.call_many([("DUMP", key) for key in keys])
    return dict(zip(keys, dumps, strict=True))


def refused_as_sharded(exc: QueueSharded, name: str) -> None:
    assert isinstance(exc, Unsupported)
    assert (exc.queue, exc.shards, exc.shard) == (name, 3, 0)
    assert "connect_queue" in str(exc)
    assert "ShardedQueue.connect" in str(exc)


async def test_a_plain_queue_on_a_sharded_name_is_refused_before_any_write(
    valkey_url: str, queue_name: str
) -> None:
    # One opened while the name was a queue of one slot (a producer in another process, say),
    # and one built by hand on the sharded queue's wire.
    before = await Queue.connect(valkey_url, queue_name)
    sharded = await ShardedQueue.connect(valkey_url, queue_name, shards=3)
    by_hand = Queue(queue_name, sharded.wire)
    try:
        [on_0], _, [on_2] = lanes_on(sharded.placement_map, [1, 0, 1])
        waiting = await sharded.enqueue("waits on shard 0", lane=on_0)
        await sharded.enqueue("waits on shard 2", lane=on_2)
        debounced = JobOptions(on_0, dedup_key="d", debounce=30.0)
        assert (await sharded.admit("a debounced job on shard 0", debounced)).kind == "scheduled"
        kept = await contents(sharded)
        verbs: list[Callable[[Queue], Awaitable[object]]] = [
            lambda q: q.enqueue("x", lane=on_2),
            lambda q: q.enqueue("x", lane=on_0),
            lambda q: q.enqueue_in(60, "x", lane=on_2),
            lambda q: q.admit("moves the debounced job", debounced),
            lambda q: q.enqueue_many([Item("x", lane=on_2), Item("y", lane=on_0)]),
            lambda q: q.claim(),
            lambda q: q.claim_batch(10),
        ]
        for plain in (before, by_hand):
            for verb in verbs:
                with pytest.raises(QueueSharded) as refused:
                    await verb(plain)
                refused_as_sharded(refused.value, queue_name)
        # A flow's nodes and a reassign's lane would land on shard 0 too: the name is read
        # once, at the first of them (``before`` read it at its connect, when it was plain).
        for verb in (
            lambda q: q.add_flow(Flow("parent", [Flow("child", lane=on_2)], lane=on_0)),
            lambda q: q.reassign(waiting.id, on_2),
        ):
            with pytest.raises(QueueSharded) as refused:
                await verb(by_hand)
            refused_as_sharded(refused.value, queue_name)
        assert await contents(sharded) == kept
        with pytest.raises(QueueSharded) as at_connect:
            await Queue.connect(valkey_url, queue_name)
        refused_as_sharded(at_connect.value, queue_name)
        # Its own shard 0, and every shard, still serve: both jobs, each once.
        assert await sharded.shards[0].enqueue("on shard 0", lane=on_0)
        claimed = [await sharded.claim() for _ in range(3)]
        assert sorted(job.payload for job in claimed if isinstance(job, Job)) == [
            "on shard 0",
            "waits on shard 0",
            "waits on shard 2",
        ]
    finally:
        await by_hand.close()
        await before.close()
        await discard(sharded)


async def test_a_blocking_queue_on_a_sharded_name_is_refused_before_any_write(
    valkey_url: str, queue_name: str
) -> None:
    before = SyncQueue.connect(valkey_url, queue_name)  # while it was a queue of one slot
    sharded = await ShardedQueue.connect(valkey_url, queue_name, shards=3)
    after = SyncQueue.connect(valkey_url, queue_name)  # reads no directory: the engine refuses
    try:
        [on_0], _, [on_2] = lanes_on(sharded.placement_map, [1, 0, 1])
        kept = await contents(sharded)
        for plain in (before, after):
            for verb in (
                lambda q: q.enqueue("x", lane=on_2),
                lambda q: q.enqueue_in(60, "x", lane=on_0),
                lambda q: q.enqueue_many([Item("x", lane=on_2), Item("y", lane=on_0)]),
            ):
                with pytest.raises(QueueSharded) as refused:
                    verb(plain)
                refused_as_sharded(refused.value, queue_name)
        assert await contents(sharded) == kept
    finally:
        after.close()
        before.close()
        await discard(sharded)


async def test_a_queue_of_one_slot_is_untouched_and_so_is_the_name_made_again(
    valkey_url: str, queue_name: str
) -> None:
    sharded = await ShardedQueue.connect(valkey_url, queue_name, shards=2)
    await sharded.pause()
    await sharded.obliterate()
    await sharded.close()
    # The marker went with shard 0's keys: the name is a queue of one slot again.
    async with await Queue.connect(valkey_url, queue_name) as plain:
        with SyncQueue.connect(valkey_url, queue_name) as sync:
            assert sync.enqueue("blocking").kind == "enqueued"
        assert (await plain.enqueue("one")).kind == "enqueued"
        verdicts = await plain.enqueue_many([Item("two"), Item("three", lane="b")])
        assert [v.kind for v in verdicts] == ["enqueued", "enqueued"]
        jobs = await plain.claim_batch(10)
        assert isinstance(jobs, list)
        assert sorted(job.payload for job in jobs) == ["blocking", "one", "three", "two"]
        await plain.pause()
        await plain.obliterate(force=True)

"""The ring-weight counters (docs/concepts/shards.md, "The active weight"): per priority band,
``own:<band>`` sums the own weights of the lanes on that band's ring and ``count:<band>`` counts
those on the default weight, kept by every script that rings a lane or takes one off."""

from __future__ import annotations

from echomq import Item, Job, Policy, Queue


async def counters(queue: Queue) -> dict[str, int]:
    raw = await queue.wire.call("HGETALL", queue.keys.ringweight)
    return {(k.decode() if isinstance(k, bytes) else str(k)): int(v) for k, v in dict(raw).items()}


async def test_counters_follow_lanes_onto_and_off_the_rings(queue: Queue) -> None:
    assert await counters(queue) == {}
    await queue.lane("heavy").weight(7)
    await queue.enqueue_many(
        [Item(1, lane="heavy"), Item(2, lane="a"), Item(3, lane="b"), Item(4, lane="urgent")]
    )
    await queue.enqueue(5, lane="urgent", priority=8)  # its head now: it moves to band 8's ring
    assert await counters(queue) == {"own:5": 7, "count:5": 2, "count:8": 1}

    # A ringed lane's own weight set moves it from count to own, cleared moves it back; the
    # default weight is no counter's business.
    assert await queue.lane("a").weight(3)
    assert await counters(queue) == {"own:5": 10, "count:5": 1, "count:8": 1}
    assert await queue.apply_policies(default=Policy(weight=4)) == 1
    assert await counters(queue) == {"own:5": 10, "count:5": 1, "count:8": 1}
    assert await queue.lane("a").weight(None)
    assert await counters(queue) == {"own:5": 7, "count:5": 2, "count:8": 1}

    # A paused lane leaves its ring's counter, and comes back with its resume.
    await queue.lane("heavy").pause()
    assert await counters(queue) == {"count:5": 2, "count:8": 1}
    await queue.lane("heavy").resume()
    assert await counters(queue) == {"own:5": 7, "count:5": 2, "count:8": 1}

    # Claims take emptied lanes off; the urgent lane drops to the default band under its next
    # head, then empties; a field at 0 is gone, and so is the key once no lane is ringed.
    leased = []
    while isinstance(job := await queue.claim(), Job):
        leased.append(job)
    assert len(leased) == 5
    assert await counters(queue) == {}

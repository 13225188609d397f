"""Flows across shards: a parent on one primary, children on another; their completions travel
through the children's queue's outbox (same slot as the children), relayed by the consumers'
upkeep with a delivery script on the parent's slot: no script ever crosses slots."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from echomq import Consumer, ConsumerOptions, Job, Queue
from echomq.engine import Flow
from echomq.engine.keys import slot
from echomq.testing import discard
from echomq.wire.cluster import ClusterRouter

Spread = Callable[[ClusterRouter, int, str], list[str]]


async def test_children_on_another_shard_release_their_parent(
    router: ClusterRouter, spread: Spread
) -> None:
    home, away = (Queue(name, router) for name in spread(router, 2, "flows"))
    owners = {router.owner(slot(q.keys.root)).address for q in (home, away)}
    assert len(owners) == 2  # the two queues live on different primaries
    seen: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def parent(job: Job) -> None:
        children = await home.children(job.id)
        if not seen.done():
            seen.set_result((job.payload, children.ordered(), children.failed))

    async def child(job: Job) -> Any:
        if job.payload == "bad":
            raise ValueError("bad child")
        return {"doubled": job.payload * 2}

    options = ConsumerOptions(beat=0.2, max_attempts=1)
    consumers = [Consumer(home, parent, options), Consumer(away, child, options)]
    runs = [asyncio.ensure_future(c.run()) for c in consumers]
    try:
        ids = await home.add_flow(
            Flow(
                "sum",
                [Flow(n, queue=away.name) for n in (1, 2, 3)]
                + [Flow("bad", queue=away.name, on_failure="ignore")],
            )
        )
        assert [c.queue for c in ids.children] == [away.name] * 4
        payload, results, failed = await asyncio.wait_for(seen, 20)
        assert payload == "sum"
        assert results == [{"doubled": 2}, {"doubled": 4}, {"doubled": 6}, None]
        assert failed == {ids.children[3].id: "ValueError: bad child"}
        assert await away.wire.call("LLEN", away.keys.outbox) == 0
    finally:
        for consumer in consumers:
            consumer.stop()
        await asyncio.gather(*runs)
        await discard(home)
        await discard(away)


async def test_a_repeated_delivery_across_shards_counts_once(
    router: ClusterRouter, spread: Spread
) -> None:
    home, away = (Queue(name, router) for name in spread(router, 2, "flowdup"))
    try:
        ids = await home.add_flow(
            Flow("p", [Flow("a", queue=away.name), Flow("b", queue=away.name)])
        )
        job = await away.claim()
        assert isinstance(job, Job)
        await away.complete(job, result="a")
        entries = await away.wire.call("LRANGE", away.keys.outbox, 0, -1)
        await away._deliver(entries)  # delivered; the relay crashes before removing it
        assert await away.relay() == 1  # delivered again, and removed
        left = await home.wire.call("HGET", home.keys.job(ids.id), "deps")
        assert (int(left), await home.state(ids.id)) == (1, "waiting")
    finally:
        await discard(home)
        await discard(away)

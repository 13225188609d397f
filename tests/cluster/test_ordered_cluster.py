"""Ordered lanes on a real cluster: the setting and the lane holders live on the queue's slot,
so every script that reads them stays single-slot legal."""

from __future__ import annotations

import uuid

from echomq import Queue
from echomq.engine import Empty
from echomq.testing import claim_job, discard
from echomq.wire.cluster import ClusterRouter


async def test_an_ordered_lane_holds_its_head_on_a_cluster(router: ClusterRouter) -> None:
    name = f"ordered-{uuid.uuid4().hex[:8]}"
    queue, other = Queue(name, router), Queue(name, router)
    try:
        await queue.ordered(True)
        assert await other.is_ordered()
        first = (await queue.enqueue("a1", lane="a")).id
        second = (await queue.enqueue("a2", lane="a")).id
        head = await claim_job(other)
        assert head.id == first
        await other.delay(head, delay=30.0)  # deferred: it keeps the lane's head
        assert await queue.claim() == Empty()
        assert await queue.remove(first)
        assert (await claim_job(other)).id == second
    finally:
        await other.close()
        await discard(queue)

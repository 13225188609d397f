"""Braces in a lane name, a dedup key or a bucket name never move a key off its queue's slot,
by Valkey's own reckoning (``CLUSTER KEYSLOT``), and every key a queue of such lanes writes sits
on the one primary that owns the queue's slot."""

from __future__ import annotations

from collections.abc import Callable

from echomq.engine.buckets import Bucket, Buckets, Taken
from echomq.engine.keys import bucket_key, slot
from echomq.engine.queue import Item, Queue
from echomq.testing import claim_job, discard
from echomq.wire.cluster import ClusterRouter

BRACED = ["{orders}", "{", "}", "{}", "a}{b", "x{y}z", "{🚀}", "{\n}", "tenant{" + "é" * 500 + "}"]


async def test_braces_in_names_keep_every_key_on_the_queue_slot(
    router: ClusterRouter, spread: Callable[[ClusterRouter, int, str], list[str]]
) -> None:
    [name] = spread(router, 1, "braces")
    queue = Queue(name, router)
    try:
        any_node = next(iter(router.nodes.values()))
        root_slot = await any_node.call("CLUSTER", "KEYSLOT", queue.keys.root)
        assert root_slot == slot(queue.keys.root)
        for braced in BRACED:
            keys = [
                queue.keys.lane(braced),
                queue.keys.lane_limiter(braced),
                queue.keys.dedup(braced),
                bucket_key(name, braced),
            ]
            for key in keys:
                assert await any_node.call("CLUSTER", "KEYSLOT", key) == root_slot, key

        await queue.enqueue_many([Item(b, lane=b, dedup_key=b) for b in BRACED])
        for braced in BRACED:
            await queue.lane(braced).rate(5, 60.0)
        assert {(await claim_job(queue)).lane for _ in BRACED} == set(BRACED)
        buckets = Buckets(router, name)
        assert isinstance(await buckets.take([Bucket(b, 1.0, 1) for b in BRACED]), Taken)
        owner = router.owner(root_slot).address
        for address, node in router.nodes.items():
            held = await node.call("CLUSTER", "COUNTKEYSINSLOT", root_slot)
            assert (held > 0) == (address == owner), address
        for braced in BRACED:  # the lane logs (smooth rates) and buckets are there, on that slot
            assert await router.call("EXISTS", queue.keys.lane_claims(braced)) == 1
            assert await router.call("EXISTS", bucket_key(name, braced)) == 1
            await router.call("DEL", bucket_key(name, braced))
    finally:
        await discard(queue)

"""Abort on a real cluster: the cancel script's ``SPUBLISH`` on the queue's ``cancel`` shard
channel is single-slot legal, and each consumer's subscription sits on the node owning its
queue, so a running job is stopped on every shard."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from echomq import Consumer, ConsumerOptions, Job, Queue
from echomq.testing import discard
from echomq.wire.cluster import ClusterRouter

Spread = Callable[[ClusterRouter, int, str], list[str]]


async def test_a_running_job_is_cancelled_on_every_shard(
    router: ClusterRouter, spread: Spread
) -> None:
    queues = [Queue(name, router, result_ttl=60) for name in spread(router, 3, "abort")]

    async def work(queue: Queue) -> None:
        started = asyncio.Event()

        async def hang(job: Job) -> None:
            started.set()
            await asyncio.Event().wait()  # only a cancel ends it

        consumer = Consumer(queue, hang, ConsumerOptions(beat=0.2))
        running = asyncio.ensure_future(consumer.run())
        try:
            verdict = await queue.enqueue("x")
            await asyncio.wait_for(started.wait(), 20)
            assert (await queue.cancel(verdict.id, "stop")).outcome == "requested"
            info = await queue.wait(verdict.id, 5)
            assert info is not None
            assert (info.state, info.cancel) == ("cancelled", "stop")
        finally:
            consumer.stop()
            tally = await running
        assert tally.cancelled == 1

    try:
        await asyncio.gather(*(work(q) for q in queues))
    finally:
        for queue in queues:
            await discard(queue)

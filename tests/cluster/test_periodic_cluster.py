"""Periodic tasks on a real cluster: three schedulers on a 1 s schedule of a queue on another
shard than the first seed enqueue each tick once (``TIME``, the derived ids, the tick record
and the dedup keys all route to the queue's slot), and a restart enqueues the missed tick once."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

from echomq import App, AppWorker, ConsumerOptions, Queue, context
from echomq.engine.ids import unix_ms
from echomq.server import EmbeddedCluster
from echomq.testing import server_ms
from echomq.wire.cluster import ClusterRouter

Spread = Callable[[ClusterRouter, int, str], list[str]]


async def test_three_schedulers_on_a_cluster_enqueue_each_tick_once(
    valkey_cluster: EmbeddedCluster, router: ClusterRouter, spread: Spread
) -> None:
    name = spread(router, 3, "periodic")[-1]
    seen: list[str] = []
    arrived = asyncio.Event()

    def scheduler_app() -> App:
        app = App(valkey_cluster.url, queue=name)

        @app.periodic(every=1.0, name="beat", missed="once")
        async def beat() -> None:
            seen.append(context().job.id)
            arrived.set()

        return app

    async def serve_until(count: int) -> None:
        """Three schedulers, each with a worker, until ``count`` occurrences have run (events,
        not a window of wall time: a loaded machine may take a second to start them)."""
        apps = [scheduler_app() for _ in range(3)]
        workers = [AppWorker(app, options=ConsumerOptions(beat=0.1)) for app in apps]
        runs = [asyncio.ensure_future(worker.run()) for worker in workers]
        async with asyncio.timeout(60):
            while len(seen) < count:
                arrived.clear()
                await arrived.wait()
        for worker in workers:
            worker.stop()
        await asyncio.gather(*runs)
        for app in apps:
            await app.close()

    probe = await Queue.connect(valkey_cluster.url, name)
    await serve_until(1)
    stopped = await server_ms(probe)
    async with asyncio.timeout(60):  # down for three ticks, by the server's clock
        while await server_ms(probe) < stopped + 3000:
            await asyncio.sleep(0.1)
    restarted = await server_ms(probe)
    await probe.close()
    await serve_until(3)
    ticks = sorted(unix_ms(id) for id in seen)
    assert len(ticks) == len(set(ticks)), "a tick ran twice"
    # "once": of the ticks missed while down, only the latest is enqueued, never each of them;
    # from there every second follows.
    assert [t for t in ticks if stopped < t < restarted - 1000] == []
    after = [t for t in ticks if t > stopped]
    assert after[0] <= restarted + 1000
    assert all(later - earlier == 1000 for earlier, later in itertools.pairwise(after))
    queue = Queue(name, router)
    await queue.pause()
    await queue.obliterate(force=True)
    await queue.close()

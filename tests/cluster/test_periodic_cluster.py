"""Periodic tasks on a real cluster: three schedulers on a 1 s schedule of a queue on another
shard than the first seed enqueue each tick once (``TIME``, the derived ids, the tick record
and the dedup keys all route to the queue's slot), and a restart enqueues the missed tick once."""

from __future__ import annotations

import asyncio
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

    def scheduler_app() -> App:
        app = App(valkey_cluster.url, queue=name)

        @app.periodic(every=1.0, name="beat", missed="once")
        async def beat() -> None:
            seen.append(context().job.id)

        return app

    async def until_ms_of_second(queue: Queue, offset: int) -> int:
        now = await server_ms(queue)
        await asyncio.sleep(((offset - now % 1000) % 1000) / 1000)
        return await server_ms(queue)

    async def serve(seconds: float) -> tuple[int, int]:
        apps = [scheduler_app() for _ in range(3)]
        queue = (await apps[0].connect()).queue()
        workers = [AppWorker(app, options=ConsumerOptions(beat=0.1)) for app in apps]
        start = await until_ms_of_second(queue, 300)
        runs = [asyncio.ensure_future(worker.run()) for worker in workers]
        await asyncio.sleep(seconds)
        stop = await until_ms_of_second(queue, 500)
        for worker in workers:
            worker.stop()
        await asyncio.gather(*runs)
        for app in apps:
            await app.close()
        return start, stop

    first = await serve(1.0)
    await asyncio.sleep(1.0)
    second = await serve(1.0)
    ticks = sorted(unix_ms(id) for id in seen)
    assert len(ticks) == len(set(ticks))
    on_time = [start // 1000 * 1000 + 1000 for start, _ in (first, second)]
    missed = second[0] // 1000 * 1000  # the latest tick of the downtime, enqueued once
    assert ticks == [on_time[0], missed, on_time[1]]
    queue = Queue(name, router)
    await queue.pause()
    await queue.obliterate(force=True)
    await queue.close()

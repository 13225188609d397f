"""Periodic tasks: a heartbeat every second, scheduled by two workers at once (two Apps, as two
processes would be), still runs once per tick: each occurrence's id is derived from the
schedule's name and the tick, so the second scheduler's enqueue is a duplicate.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/periodic.py
"""

from __future__ import annotations

import asyncio
import os

from echomq import App, AppWorker, ConsumerOptions, context

URL = os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379")


def make_app(ran: list[str], three: asyncio.Event) -> App:
    """One worker process's App (every process declares the same schedules)."""
    app = App(URL, queue="periodic-demo")

    @app.periodic(every=1.0, name="heartbeat")  # seconds; cron= needs the echomq[cron] extra
    async def heartbeat() -> None:
        ran.append(context().job.id)
        if len(ran) == 3:
            three.set()

    return app


async def main() -> None:
    ran: list[str] = []
    three = asyncio.Event()
    apps = [make_app(ran, three), make_app(ran, three)]
    schedule = apps[0].schedules["heartbeat"]
    async with apps[0] as app:
        started = await _server_ms(app)
    workers = [AppWorker(app, options=ConsumerOptions(beat=0.1)) for app in apps]
    runs = [asyncio.ensure_future(worker.run()) for worker in workers]
    await asyncio.wait_for(three.wait(), 30)  # three ticks: the first on the next whole second
    await asyncio.sleep(0.3)  # long enough for a doubled occurrence to have run too
    for worker in workers:
        worker.stop()
    await asyncio.gather(*runs)
    # Every occurrence's id is the one any scheduler derives for its tick.
    tick, ids = schedule.after(started - 1000), set()
    for _ in range(6):
        tick = schedule.after(tick)
        ids.add(schedule.id_at(tick))
    async with apps[0] as app:
        await app.queue().wire.call("DEL", app.queue().keys.periodic)  # the demo's own record
    for app in apps:
        await app.close()
    print("runs:", len(ran), "| distinct:", len(set(ran)))
    print("each a tick's derived id:", set(ran) <= ids)


async def _server_ms(app: App) -> int:
    seconds, micros = await app.queue().wire.call("TIME")
    return int(seconds) * 1000 + int(micros) // 1000


if __name__ == "__main__":
    asyncio.run(main())

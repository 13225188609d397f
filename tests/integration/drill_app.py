"""The deploy drill's processes (test_deploy_drill.py): one lane, ``acme``, at rate(5, 1.0) and
limit(2) in the mode the test names, declared with ``app.lanes`` so that every process applies
the policies at start, as a deployed app does. ``python drill_app.py producer|worker`` runs one
process until SIGTERM. Each job answers the server ms it was claimed at: its lease deadline
minus the lease, both the engine's."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from echomq import App, AppWorker, ConsumerOptions, Policy, Rate, context

QUEUE = os.environ.get("ECHOMQ_TEST_QUEUE", "drill")
MODE = os.environ.get("ECHOMQ_TEST_MODE", "smooth")
LEASE = 30.0
RATE, LIMIT = Rate(5, 1.0, mode=MODE), 2  # type: ignore[arg-type]

app = App(os.environ.get("ECHOMQ_TEST_URL"), queue=QUEUE, concurrency=4)
app.lanes(acme=Policy(rate=RATE, limit=LIMIT))


@app.task(lane="tenant")
async def work(tenant: str, n: int) -> int:
    await asyncio.sleep(0.05)
    return context().job.deadline_ms - int(LEASE * 1000)


async def produce(stop: asyncio.Event) -> None:
    async with app:  # connecting applies the lane policies
        n = 0
        while not stop.is_set():
            await work.enqueue("acme", n)
            n += 1
            await asyncio.sleep(0.1)


async def serve(stop: asyncio.Event) -> None:
    worker = AppWorker(app, options=ConsumerOptions(concurrency=4, lease=LEASE))
    asyncio.get_running_loop().create_task(_stop_on(stop, worker))
    await worker.run()  # connecting applies the lane policies
    await app.close()


async def _stop_on(stop: asyncio.Event, worker: AppWorker) -> None:
    await stop.wait()
    worker.stop()


async def main(role: str) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("up", flush=True)
    await (produce(stop) if role == "producer" else serve(stop))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))

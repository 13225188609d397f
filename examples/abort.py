"""Abort: a scheduled job cancelled before it runs, and a running one stopped by its worker
through the engine; the row the handler was writing when the cancel came is finished first
(a shielded block), and the handle's result says the job was cancelled.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/abort.py
"""

from __future__ import annotations

import asyncio
import os

from echomq import App, AppWorker, TaskCancelled, shielded

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="abort-demo")
written: list[int] = []
started = asyncio.Event()


@app.task()
async def export(rows: int) -> int:
    for n in range(rows):
        async with shielded():  # a row is written whole: a cancel waits for the block's end
            started.set()
            await asyncio.sleep(1.0)  # writing row n
            written.append(n)
    return rows


async def main() -> None:
    async with app:
        later = await export.using(delay=3600).enqueue(10)
        print("scheduled job:", (await later.cancel("not needed")).outcome)
        handle = await export.enqueue(1000)
        worker = AppWorker(app)
        serving = asyncio.ensure_future(worker.run())
        await started.wait()
        print("running job:", (await handle.cancel("operator said stop")).outcome)
        try:
            await handle.result(timeout=10)
        except TaskCancelled as exc:
            print("result: cancelled,", exc.reason)
        worker.stop()
        await serving
        status = await handle.status()
        assert status is not None
        print("state:", status.state, "attempts", status.attempts, "rows written", len(written))


if __name__ == "__main__":
    asyncio.run(main())

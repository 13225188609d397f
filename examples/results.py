"""Results: a task's return value is kept (one day by default) and read through its handle;
a task that fails for good raises ``TaskFailed`` from ``result()``, with its traceback.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/results.py
"""

from __future__ import annotations

import asyncio
import os

from echomq import App, AppWorker, TaskFailed

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="results-demo")


@app.task()
async def add(a: int, b: int) -> int:
    return a + b


@app.task(retries=0)
async def divide(a: int, b: int) -> float:
    return a / b


async def main() -> None:
    async with app:
        total = await add.enqueue(2, 3)
        broken = await divide.enqueue(1, 0)
        worker = asyncio.ensure_future(AppWorker(app).run_until_idle())
        print("2 + 3 =", await total.result(timeout=10))  # waits without polling
        try:
            await broken.result(timeout=10)
        except TaskFailed as failed:
            print("1 / 0 failed:", failed.error)
            print((failed.traceback or "").splitlines()[-1])
        await worker
        status = await total.status()
        assert status is not None
        print("status:", status.state, "attempts", status.attempts)


if __name__ == "__main__":
    asyncio.run(main())

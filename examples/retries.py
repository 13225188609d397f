"""Retries and dead letters with the task layer: a task that fails twice and then succeeds,
one that never can, a dead letter read back with its error and traceback, and reprocessed.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/retries.py

docs/guides/results.md shows this file; tests/examples/test_examples.py runs it.
"""

from __future__ import annotations

import asyncio
import os

from echomq import App, AppWorker, Fixed, TaskFailed, context

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="retries-demo")
FIXED = {"upstream": False}


@app.task(retries=2, backoff=Fixed(0.1))  # 3 attempts in all, 0.1 s apart
async def fetch(url: str) -> str:
    if context().attempt < 3:
        raise ConnectionError(f"{url} timed out (attempt {context().attempt})")
    return f"fetched {url} at attempt {context().attempt}"


@app.task(retries=1, backoff=Fixed(0.1))
async def charge(order: int) -> str:
    if not FIXED["upstream"]:
        raise ValueError(f"order {order}: card declined")
    return f"order {order} charged"


async def main() -> None:
    async with app:
        worker = AppWorker(app)
        running = asyncio.create_task(worker.run())  # a worker in this process, until stop()
        flaky = await fetch.enqueue("https://api.example.test/rates")
        doomed = await charge.enqueue(17)
        print(await flaky.result(timeout=30))  # after two failed attempts and their backoff
        try:
            await doomed.result(timeout=30)
        except TaskFailed as failed:  # the job is dead: its last error and traceback kept
            last = (failed.traceback or "").splitlines()[-1]
            print("dead:", failed.error, "| traceback ends:", last)
        queue = app.queue("retries-demo")
        print("dead letters:", [info.last_error for info in await queue.dead(10)])
        FIXED["upstream"] = True  # the cause is fixed: give the dead job a fresh budget
        assert await queue.reprocess(doomed.id)
        print(await doomed.result(timeout=30))
        worker.stop()  # nothing new is claimed; jobs in hand finish
        await running


if __name__ == "__main__":
    asyncio.run(main())

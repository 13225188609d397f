"""Progress and logs: a task reports how far it got and appends log lines; a subscriber sees
each report as an event, and the handle reads the latest progress and the log afterwards.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/progress.py
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from echomq import App, AppWorker, context

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="progress-demo")


@app.task()
async def import_rows(rows: int) -> int:
    for n in range(1, rows + 1):
        await context().progress({"done": n, "of": rows})  # a small JSON value
    await context().log(f"imported {rows} rows")
    return rows


async def main() -> None:
    seen: list[dict[str, Any]] = []
    async with app:
        async with app.queue().subscribe() as events:

            async def watch() -> None:
                async for event in events:
                    if event.get("event") in ("progress", "log"):
                        seen.append(event)
                    if event.get("event") == "log":
                        return

            watcher = asyncio.ensure_future(watch())
            handle = await import_rows.enqueue(3)
            await AppWorker(app).run_until_idle()
            await asyncio.wait_for(watcher, 10)
        print("result:", await handle.result(timeout=5))
        print("progress:", await handle.progress())
        print("logs:", await handle.logs())
        print("events:", [e["event"] for e in seen])


if __name__ == "__main__":
    asyncio.run(main())

"""A worker's hooks: startup and shutdown hooks fill and empty the state tasks share (a pool,
a client), job hooks run around each attempt and see its outcome.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/hooks.py

docs/guides/tasks.md shows this file; tests/examples/test_examples.py runs it.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from echomq import App, AppWorker, Context, TaskOutcome, context

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="hooks-demo")
TRAIL: list[str] = []


@app.on_startup  # before the worker's first job; raising stops it with HookFailed
async def open_db(state: dict[str, Any]) -> None:
    state["db"] = {"acme": "Acme Corp"}  # … a connection pool, an HTTP client …
    TRAIL.append("startup")


@app.on_shutdown  # after its last job
async def close_db(state: dict[str, Any]) -> None:
    state.pop("db")
    TRAIL.append("shutdown")


@app.before_job  # before each attempt; raising fails the attempt
async def before(ctx: Context) -> None:
    TRAIL.append(f"before {ctx.task} attempt {ctx.attempt}")


@app.after_job  # after each attempt: outcome.result, or outcome.error
async def after(ctx: Context, outcome: TaskOutcome) -> None:
    TRAIL.append(f"after {ctx.task}: {outcome.result!r}")


@app.task()
async def company(tenant: str) -> str:
    return str(context().state["db"][tenant])  # what the startup hook put in the state


async def main() -> None:
    async with app:
        handle = await company.enqueue("acme")
        await AppWorker(app).run_until_idle()
        print(await handle.result(timeout=5))
    print(" | ".join(TRAIL))


if __name__ == "__main__":
    asyncio.run(main())

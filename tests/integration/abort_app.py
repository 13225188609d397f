"""An App the abort tests run in a worker process (``echomq worker abort_app:app``): a task that
reports it started and then waits for ever, writing a log line when it is cancelled."""

from __future__ import annotations

import asyncio
import os

from echomq import App, context

# The test names the queue (a fresh one per test) through the environment, as an app would.
app = App(queue=os.environ.get("ECHOMQ_TEST_QUEUE", "abort-app"), concurrency=4)


@app.task
async def hang() -> None:
    await context().progress("started")
    try:
        await asyncio.Event().wait()  # only a cancel ends it
    except asyncio.CancelledError:
        await context().log("stopped")  # the marker: the handler itself was cancelled
        raise

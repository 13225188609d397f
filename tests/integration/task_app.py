"""An App that the worker-process tests run (``echomq worker task_app:app``): a task on each of
two queues, and a startup hook that announces each worker process in a marker folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from echomq import App

# The test names the queue (a fresh one per test) through the environment, as an app would.
QUEUE = os.environ.get("ECHOMQ_TEST_QUEUE", "task-app")
app = App(queue=QUEUE, concurrency=4)


@app.on_startup
async def announce(state: dict[str, Any]) -> None:
    marker = os.environ.get("ECHOMQ_TEST_MARKER")
    if marker:
        (Path(marker) / str(os.getpid())).write_text("up\n")


@app.task
async def add(a: int, b: int) -> int:
    return a + b


@app.task(queue=f"{QUEUE}-other")
async def whoami() -> int:
    return os.getpid()

"""An App with a 1 s schedule that the worker-process test runs (``echomq worker
periodic_app:app``): each occurrence appends its id to a file, so a doubled run shows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from echomq import App, context

QUEUE = os.environ.get("ECHOMQ_TEST_QUEUE", "periodic-app")
MARKER = os.environ.get("ECHOMQ_TEST_MARKER", "")
app = App(queue=QUEUE)


@app.on_startup
async def announce(state: dict[str, Any]) -> None:
    if MARKER:
        (Path(MARKER) / str(os.getpid())).write_text("up\n")


def record(line: str) -> None:
    with open(Path(MARKER).parent / "ran.log", "a") as log:  # one write per line: O_APPEND
        log.write(line + "\n")


@app.periodic(every=1.0, name="beat")
async def beat() -> None:
    record(context().job.id)  # a few bytes to a local file: not worth a thread

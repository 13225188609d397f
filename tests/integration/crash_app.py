"""An App whose every worker process fails at start (``echomq worker crash_app:app``): its
startup hook marks the process in a marker folder, then raises, as a hook whose database is
down would. The supervisor must back such a crash loop off, not restart it at once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from echomq import App

QUEUE = os.environ.get("ECHOMQ_TEST_QUEUE", "crash-app")
app = App(queue=QUEUE)


@app.on_startup
async def connect_database(state: dict[str, Any]) -> None:
    marker = os.environ.get("ECHOMQ_TEST_MARKER")
    if marker:
        (Path(marker) / str(os.getpid())).write_text("started\n")
    raise RuntimeError("no database")


@app.task
async def noop() -> None:
    return None

"""An App whose every worker process fails (``echomq worker crash_app:app``): its startup hook
marks the process in a marker folder, then raises, as a hook whose database is down would; or,
with ``ECHOMQ_TEST_CRASH=serving``, lets the worker get ready and exits with 3 a second later,
as a bug at its first claim would. The supervisor must back either crash loop off, not restart
it at once."""

from __future__ import annotations

import asyncio
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
    if os.environ.get("ECHOMQ_TEST_CRASH") == "serving":
        asyncio.get_running_loop().call_later(1.0, os._exit, 3)
        return
    raise RuntimeError("no database")


@app.task
async def noop() -> None:
    return None

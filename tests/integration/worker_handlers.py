"""Handlers that the worker-process tests load by path (``worker_handlers:…``)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from echomq import Job


async def sleepy(job: Job) -> None:
    """Announce the job in a marker file, then sleep as long as the payload says."""
    marker = os.environ.get("ECHOMQ_TEST_MARKER")
    if marker:
        Path(marker).write_text(f"{job.id} {job.attempts}\n")  # noqa: ASYNC240 - tiny, test-only
    await asyncio.sleep(float(job.payload["sleep"]))


def not_async(job: Job) -> None:
    """Not a coroutine function: the worker must refuse it before connecting."""

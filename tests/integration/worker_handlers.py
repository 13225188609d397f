"""Handlers that the worker-process tests load by path (``worker_handlers:…``)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from echomq import Defer, Job


async def sleepy(job: Job) -> None:
    """Announce the job in a marker file, then sleep as long as the payload says."""
    marker = os.environ.get("ECHOMQ_TEST_MARKER")
    if marker:
        Path(marker).write_text(f"{job.id} {job.attempts}\n")  # noqa: ASYNC240 - tiny, test-only
    await asyncio.sleep(float(job.payload["sleep"]))


def not_async(job: Job) -> None:
    """Not a coroutine function: the worker must refuse it before connecting."""


async def ordered_log(job: Job) -> None:
    """Append a start and an end line for the job to the marker file, with the pid (one
    O_APPEND write per line, whole across processes); defer every third job's first claim."""
    path = os.environ["ECHOMQ_TEST_MARKER"]
    if job.attempts == 1 and int(job.payload) % 3 == 1:
        raise Defer(0.03)
    _append(path, f"start {job.lane} {job.payload} {os.getpid()}\n")
    await asyncio.sleep(0.03)
    _append(path, f"end {job.lane} {job.payload} {os.getpid()}\n")


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)

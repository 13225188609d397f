"""Handlers for benchmark worker processes (``echomq worker _handlers:noop``).

``timed`` records enqueue → start latency (the payload is the producer's ``time.monotonic()``,
one clock for every process on the host) and writes the samples, one per line, to the file
named by ``BENCH_SAMPLES`` when the process exits.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import time

from echomq import Job

_samples: list[float] = []


async def noop(job: Job) -> None:
    return None


async def timed(job: Job) -> None:
    _samples.append(time.monotonic() - float(job.payload))


@atexit.register
def _dump() -> None:
    path = os.environ.get("BENCH_SAMPLES")
    if path and _samples:
        with open(path, "w") as out:
            out.write("\n".join(f"{s:.9f}" for s in _samples))


async def sleepy(job: Job) -> None:
    """A job that takes ``BENCH_HANDLER_MS`` (default 20) of waiting, as an I/O-bound task."""
    await asyncio.sleep(float(os.environ.get("BENCH_HANDLER_MS", "20")) / 1000)

"""Helpers for tests of code that uses echomq: the engine's clock, and tidy queues.

Waiting on the engine's clock (the one leases, delays and windows use) instead of the host's
makes time-based tests exact: ``await wait_for_server_ms(queue, job.deadline_ms)``.
``serve_app`` runs an ASGI app (the dashboard) on a free local port for the length of a test.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from echomq.engine.queue import Queue
from echomq.engine.results import Job

__all__ = ["claim_job", "discard", "serve_app", "server_ms", "wait_for_server_ms"]


async def server_ms(queue: Queue) -> int:
    """The server clock in ms, as the scripts see it (``TIME``)."""
    seconds, micros = await queue.wire.call("TIME")
    return int(seconds) * 1000 + int(micros) // 1000


async def wait_for_server_ms(queue: Queue, target_ms: int) -> None:
    """Return once the server clock is past ``target_ms`` (a lease deadline, a run-at)."""
    while (now := await server_ms(queue)) <= target_ms:
        await asyncio.sleep((target_ms - now + 1) / 1000)


async def claim_job(queue: Queue, lease: float = 30.0) -> Job:
    """Claim and insist on a job: raise ``AssertionError`` naming what came back instead."""
    job = await queue.claim(lease)
    if not isinstance(job, Job):
        raise AssertionError(f"expected a job, got {job!r}")
    return job


async def discard(queue: Queue) -> None:
    """Delete every key of ``queue`` (pausing it first) and close it."""
    await queue.pause()
    await queue.obliterate(force=True)
    await queue.close()


@contextlib.asynccontextmanager
async def serve_app(app: Any, *, startup_timeout: float = 10.0) -> AsyncIterator[str]:
    """Serve an ASGI ``app`` with uvicorn on ``127.0.0.1`` and a free port; yields its base URL
    (``http://127.0.0.1:<port>``). Close your clients (event streams too) before leaving."""
    from echomq.dashboard import serving

    async with serving(app, startup_timeout=startup_timeout) as base:
        yield base

"""Helpers for tests of code that uses echomq: the engine's clock, and tidy queues.

Waiting on the engine's clock (the one leases, delays and windows use) instead of the host's
makes time-based tests exact: ``await wait_for_server_ms(queue, job.deadline_ms)``.
``serve_app`` runs an ASGI app (the dashboard) on a free local port for the length of a test.
``lanes_on`` / ``lane_on`` name lanes that a sharded queue's map places on given shards;
``most_in_window`` checks a rate from what was claimed (the most claims any window held).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from echomq.engine.queue import Queue
from echomq.engine.results import Job
from echomq.engine.shards import ShardMap

__all__ = [
    "claim_job",
    "discard",
    "lane_on",
    "lanes_on",
    "most_in_window",
    "serve_app",
    "server_ms",
    "wait_for_server_ms",
]


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


def most_in_window(times_ms: Sequence[int], window_ms: int) -> int:
    """The most of ``times_ms`` (claim times, say ``job.deadline_ms - lease_ms``) that any
    window of ``window_ms`` holds, wherever it starts: a smooth rate of M per window held iff
    this is at most M."""
    every, most, start = sorted(times_ms), 0, 0
    for end, t in enumerate(every):
        while every[start] <= t - window_ms:
            start += 1
        most = max(most, end - start + 1)
    return most


def lanes_on(placement: ShardMap, per_shard: Sequence[int], prefix: str = "t") -> list[list[str]]:
    """Lane names (``prefix`` + 0, 1, …) that ``placement`` puts on each shard:
    ``per_shard[k]`` of them on shard k, for a test that needs lanes on chosen shards."""
    if len(per_shard) > placement.shards:
        raise ValueError(f"per_shard names {len(per_shard)} shards; the map has {placement.shards}")
    found: list[list[str]] = [[] for _ in per_shard]
    i = 0
    while any(len(found[k]) < want for k, want in enumerate(per_shard)):
        lane = f"{prefix}{i}"
        k = placement.shard_of(lane)
        if k < len(found) and len(found[k]) < per_shard[k]:
            found[k].append(lane)
        i += 1
    return found


def lane_on(placement: ShardMap, shard: int, prefix: str = "t") -> str:
    """The first lane name (``prefix`` + 0, 1, …) that ``placement`` puts on ``shard``."""
    return lanes_on(placement, [int(k == shard) for k in range(shard + 1)], prefix)[shard][0]


@contextlib.asynccontextmanager
async def serve_app(app: Any, *, startup_timeout: float = 10.0) -> AsyncIterator[str]:
    """Serve an ASGI ``app`` with uvicorn on ``127.0.0.1`` and a free port; yields its base URL
    (``http://127.0.0.1:<port>``). Close your clients (event streams too) before leaving."""
    from echomq.dashboard import serving

    async with serving(app, startup_timeout=startup_timeout) as base:
        yield base

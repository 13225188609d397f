"""Capacity: what one claim costs on the live server, and what a target rate needs.

Processes are concurrency, sockets are parallelism: one connector pipelines every call of its
process, so throughput is pool width × what one connector sustains, not the number of
consumers. The probe runs on a sibling queue (``<queue>.capacity-probe``) and removes it.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

from echomq.engine.producer import Item
from echomq.engine.queue import Queue
from echomq.engine.results import Job
from echomq.wire.url import ConnectionOptions


@dataclass(frozen=True, slots=True)
class Capacity:
    """Measured costs (seconds) and the sizing they imply for ``target`` jobs/s."""

    round_trip: float  # one claim + complete, one at a time
    engine: float  # server time per script call
    per_connector: float  # jobs/s one connector sustained with many tasks in flight
    target: float
    handler: float
    concurrency: int

    @property
    def engine_ceiling(self) -> float:
        """Jobs/s one server could do if clients were free (claim + complete per job)."""
        return 1 / (2 * self.engine) if self.engine else math.inf

    @property
    def pool_width(self) -> int:
        return max(1, math.ceil(self.target / self.per_connector))

    @property
    def processes(self) -> int:
        """Worker processes (``echomq worker --processes``) for the target: one event loop is
        one core, and one process sustained what its one connector did."""
        return max(1, math.ceil(self.target / self.per_connector))

    @property
    def consumers(self) -> int:
        """By Little's law: jobs in flight = rate × time each spends in hand."""
        in_flight = self.target * (self.round_trip + self.handler)
        return max(1, math.ceil(in_flight / self.concurrency))


async def _engine_usec(queue: Queue) -> tuple[int, int]:
    info = (await queue.wire.call("INFO", "commandstats")).decode()
    for line in info.splitlines():
        if line.startswith("cmdstat_evalsha:"):
            calls = int(line.split("calls=")[1].split(",")[0])
            usec = int(line.split("usec=")[1].split(",")[0])
            return calls, usec
    return 0, 0


async def measure(
    options: ConnectionOptions,
    queue_name: str,
    *,
    target: float = 1000.0,
    handler: float = 0.0,
    concurrency: int = 10,
    jobs: int = 2000,
) -> Capacity:
    probe = await Queue.connect(options, f"{queue_name}.capacity-probe", pool_size=1, events=False)
    try:
        await probe.enqueue_many([Item(None) for _ in range(jobs)])
        # One at a time: the round trip a consumer pays per job.
        sample = min(200, jobs // 4)
        started = time.perf_counter()
        for _ in range(sample):
            job = await probe.claim(60)
            assert isinstance(job, Job)
            await probe.complete(job)
        round_trip = (time.perf_counter() - started) / sample
        # Many tasks on one connector: what one socket sustains.
        calls0, usec0 = await _engine_usec(probe)
        started = time.perf_counter()

        async def drain() -> int:
            done = 0
            while isinstance(job := await probe.claim(60), Job):
                await probe.complete(job)
                done += 1
            return done

        drained = sum(await asyncio.gather(*(drain() for _ in range(50))))
        elapsed = time.perf_counter() - started
        calls1, usec1 = await _engine_usec(probe)
        engine = (usec1 - usec0) / max(1, calls1 - calls0) / 1e6
        return Capacity(round_trip, engine, drained / elapsed, target, handler, concurrency)
    finally:
        await probe.pause()
        await probe.obliterate(force=True)
        await probe.close()


def report(capacity: Capacity) -> list[tuple[str, str]]:
    c = capacity
    rows = [
        ("claim + complete round trip", f"{c.round_trip * 1000:.2f} ms"),
        ("engine time per script call", f"{c.engine * 1e6:.1f} µs"),
        ("engine ceiling", f"{c.engine_ceiling:,.0f} jobs/s (claim + complete each)"),
        ("one connector sustains", f"{c.per_connector:,.0f} jobs/s"),
        ("target", f"{c.target:,.0f} jobs/s with {c.handler * 1000:.0f} ms handlers"),
        ("pool width needed", str(c.pool_width)),
        ("consumers needed", f"{c.consumers} (concurrency {c.concurrency} each)"),
        (
            "worker processes for the target",
            f"{c.processes} (one process sustained {c.per_connector:,.0f} jobs/s)",
        ),
    ]
    if c.target > c.engine_ceiling:
        rows.append(
            (
                "warning",
                "the target exceeds what one server's engine can do: claim in batches "
                "(claim_batch) or spread queues over a cluster",
            )
        )
    return rows

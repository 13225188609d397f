"""The cost of flow control: token bucket takes/s, and the claim gate's own overhead.

Run: ``.venv/bin/python bench/limits.py [--runs 5] [--url valkey://…]``. Medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from _harness import serve
from echomq import Bucket, Buckets, Item, Job, Queue
from echomq.testing import discard


async def takes_per_second(queue: Queue, buckets_per_take: int, seconds: float) -> float:
    buckets = Buckets(queue.wire, f"bench{time.time_ns()}")
    plenty = Bucket("global", 1e9, 1_000_000_000)
    chats = [Bucket(f"chat{n}", 1e9, 1_000_000_000) for n in range(50)]
    done = 0
    stop_at = time.perf_counter() + seconds

    async def task(n: int) -> None:
        nonlocal done
        wanted = [plenty, chats[n]][:buckets_per_take]
        while time.perf_counter() < stop_at:
            await buckets.take(wanted)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(task(n) for n in range(50)))
    return done / (time.perf_counter() - started)


async def drain_rate(queue: Queue, jobs: int, limited: bool) -> float:
    if limited:  # budgets far above what the drain can reach: only the gate's cost shows
        await queue.rate_limit(10_000_000, 1.0)
        await queue.lane("_").rate(10_000_000, 1.0)
    else:
        await queue.rate_limit(None)
        await queue.lane("_").rate(None)
    for start in range(0, jobs, 1000):
        await queue.enqueue_many([Item(n) for n in range(start, start + 1000)])

    async def task() -> None:
        while isinstance(job := await queue.claim(), Job):
            await queue.complete(job)

    started = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(50)))
    return jobs / (time.perf_counter() - started)


async def run(url: str, runs: int, jobs: int) -> None:
    queue = await Queue.connect(url, f"bench-limits-{time.time_ns()}", pool_size=2, events=False)
    rows: dict[str, list[float]] = {}
    for _ in range(runs):
        rows.setdefault("take, 1 bucket", []).append(await takes_per_second(queue, 1, 2.0))
        rows.setdefault("take, 2 buckets", []).append(await takes_per_second(queue, 2, 2.0))
        rows.setdefault("claim+complete, no limits", []).append(
            await drain_rate(queue, jobs, False)
        )
        rows.setdefault("claim+complete, queue + lane limit far above the rate", []).append(
            await drain_rate(queue, jobs, True)
        )
    await discard(queue)
    print(f"50 concurrent tasks, one process, median of {runs} runs\n")
    print("| case | per second |")
    print("|---|---:|")
    for name, values in rows.items():
        print(f"| {name} | {statistics.median(values):,.0f} |")
    base = statistics.median(rows["claim+complete, no limits"])
    gated = statistics.median(rows["claim+complete, queue + lane limit far above the rate"])
    print(f"\ngate overhead: limited / unlimited = {gated / base:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=10_000)
    return serve(parser, lambda url, args: run(url, args.runs, args.jobs))


if __name__ == "__main__":
    sys.exit(main())

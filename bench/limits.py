"""The cost of flow control: token bucket takes/s, the claim gate's own overhead, and the
engine's µs per claim under each rate mode (fixed window, smooth sliding log).

Run: ``.venv/bin/python bench/limits.py [--runs 5] [--url valkey://…]``. Medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from _harness import claim_blocks, serve
from echomq import Item, Job, Policy, Queue, Rate
from echomq.engine import Bucket, Buckets
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
        await queue.rate_limit(10_000_000, 1.0, mode="fixed")
        await queue.lane("_").rate(10_000_000, 1.0, mode="fixed")
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


async def rate_queue(url: str, mode: str | None, jobs: int) -> Queue:
    """A queue whose rate and whose lanes' rate (the default policy) are in ``mode`` (None: no
    rates), each 10 000 per second: above what one claiming task reaches, so each claim pays the
    gate's full upkeep (a smooth log holds the newest 10 000 claims, each claim pushes one)."""
    queue = await Queue.connect(url, f"bench-modes-{time.time_ns()}", pool_size=1, events=False)
    if mode is not None:
        await queue.rate_limit(10_000, 1.0, mode=mode)  # type: ignore[arg-type]
        await queue.apply_policies(default=Policy(rate=Rate(10_000, 1.0, mode)))  # type: ignore[arg-type]
    for start in range(0, jobs, 1000):
        groups = [f"tenant{n % 20}" for n in range(start, start + 1000)]
        await queue.enqueue_many([Item(n, lane=g) for n, g in enumerate(groups)])
    return queue


async def claim_costs(url: str, jobs: int, block: int = 250) -> dict[str, tuple[float, float]]:
    """The engine's own µs per claim script and the commands it ran inside each, per mode. The
    modes take turns in blocks of ``block`` claims (a noisy host weighs on each alike); each
    block's share is the change of ``INFO commandstats`` across it."""
    modes: dict[str, str | None] = {"no rates": None, "fixed": "fixed", "smooth": "smooth"}
    queues = {name: await rate_queue(url, mode, jobs) for name, mode in modes.items()}
    for queue in queues.values():  # the logs reach their working size first
        for _ in range(jobs // 4):
            await queue.claim(600)
    figures = await claim_blocks(queues, (jobs // 2) // block, block)
    for queue in queues.values():
        await discard(queue)
        await queue.close()
    return figures


async def run(url: str, runs: int, jobs: int, modes_only: bool = False) -> None:
    if not modes_only:
        await gates(url, runs, jobs)
    await rate_modes(url, runs, jobs)


async def gates(url: str, runs: int, jobs: int) -> None:
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


async def rate_modes(url: str, runs: int, jobs: int) -> None:
    usec: dict[str, list[float]] = {}
    calls: dict[str, float] = {}
    for _ in range(runs):
        for name, (per_claim, inner) in (await claim_costs(url, jobs)).items():
            usec.setdefault(name, []).append(per_claim)
            calls[name] = inner
    print(
        f"\nthe claim per rate mode: queue + every lane at 10 000/s, 20 lanes, median of {runs}\n"
    )
    print("| rate mode | engine µs per claim | commands inside per claim |")
    print("|---|---:|---:|")
    for name, values in usec.items():
        print(f"| {name} | {statistics.median(values):.1f} | {calls[name]:.2f} |")
    fixed, smooth = statistics.median(usec["fixed"]), statistics.median(usec["smooth"])
    ratio = calls["smooth"] / calls["fixed"]
    print(f"\nsmooth / fixed = {smooth / fixed:.2f} (µs), {ratio:.2f} (commands)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--modes-only", action="store_true", help="only the rate-mode table")
    return serve(parser, lambda url, args: run(url, args.runs, args.jobs, args.modes_only))


if __name__ == "__main__":
    sys.exit(main())

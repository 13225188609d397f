"""Fairness by work: two backlogged tenants, A's jobs run 10x as long as B's, served by one real
``Consumer`` (concurrency 8) for a fixed time under each mode of ``queue.fairness``: by count
(the default), by cost (A's jobs carry ``cost=10``) and by time (the leases' measured time).
Prints each tenant's share of the jobs and of the worker time, median of the runs.

By count both tenants get the same jobs, so A gets ~10/11 of the worker time; by cost and by
time each gets ~1/2 of the worker time (the issue's target: equal worker time within ±10%).

Run: ``PYTHONPATH=src .venv/bin/python bench/fair_work.py [--runs 3] [--seconds 6]
[--short-ms 3] [--concurrency 8] [--url valkey://…]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter

from _harness import serve
from echomq import Consumer, ConsumerOptions, Job, Queue
from echomq.engine.options import JobOptions
from echomq.testing import discard

MODES = ("count", "cost", "time")
BACKLOG = {"A": 4_000, "B": 40_000}


async def one_run(url: str, mode: str, args: argparse.Namespace) -> dict[str, float]:
    """One mode's run: shares of jobs and of worker time per tenant."""
    short = args.short_ms / 1000
    run_for = {"A": 10 * short, "B": short}
    queue = await Queue.connect(url, f"bench-fair-{mode}-{time.time_ns()}", pool_size=2)
    jobs: Counter[str] = Counter()
    busy: Counter[str] = Counter()

    async def handler(job: Job) -> None:
        started = time.monotonic()
        await asyncio.sleep(run_for[job.lane])  # the job's work
        busy[job.lane] += time.monotonic() - started
        jobs[job.lane] += 1

    try:
        if mode != "count":
            await queue.fairness(mode, quantum=10 if mode == "cost" else 10 * short)  # type: ignore[arg-type]
        for lane, n in BACKLOG.items():
            cost = 10 if (lane == "A" and mode == "cost") else None
            for start in range(0, n, 1000):
                size = min(1000, n - start)
                await queue.admit_many(
                    [(lane, JobOptions(lane=lane, cost=cost)) for _ in range(size)]
                )
        consumer = Consumer(queue, handler, ConsumerOptions(concurrency=args.concurrency))
        running = asyncio.ensure_future(consumer.run())
        await asyncio.sleep(args.warmup)
        jobs.clear()
        busy.clear()
        await asyncio.sleep(args.seconds)
        snapshot_jobs, snapshot_busy = Counter(jobs), Counter(busy)
        consumer.stop()
        await running
    finally:
        await discard(queue)
    total_jobs = sum(snapshot_jobs.values()) or 1
    total_busy = sum(snapshot_busy.values()) or 1.0
    return {
        "A jobs": snapshot_jobs["A"] / total_jobs,
        "A time": snapshot_busy["A"] / total_busy,
        "B time": snapshot_busy["B"] / total_busy,
        "jobs/s": total_jobs / args.seconds,
    }


async def run(url: str, args: argparse.Namespace) -> None:
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.runs):
        for mode in MODES:  # interleaved: the host's noise falls on every mode alike
            results[mode].append(await one_run(url, mode, args))
    print(
        f"A's jobs run {10 * args.short_ms} ms, B's {args.short_ms} ms; one consumer, "
        f"concurrency {args.concurrency}; {args.seconds} s measured after {args.warmup} s; "
        f"median of {args.runs} runs"
    )
    print()
    print(
        "| fairness | A's share of jobs | A's share of worker time | B's share of worker time "
        "| A:B time | jobs/s |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for mode in MODES:
        med = {k: statistics.median(r[k] for r in results[mode]) for k in results[mode][0]}
        ratio = med["A time"] / med["B time"] if med["B time"] else float("inf")
        print(
            f"| by {mode} | {med['A jobs']:.1%} | {med['A time']:.1%} | {med['B time']:.1%} | "
            f"{ratio:.2f} | {med['jobs/s']:.0f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--short-ms", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=8)
    return serve(parser, run)


if __name__ == "__main__":
    raise SystemExit(main())

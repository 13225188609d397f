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

from _harness import commandstats, engine_usec_per_script, serve
from commands import _inner_calls
from echomq import Bucket, Buckets, Item, Job, Policy, Queue, Rate
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


async def claim_usec(url: str, mode: str | None, jobs: int) -> tuple[float, float]:
    """The engine's own µs per claim script (``INFO commandstats``) on a queue whose rate and
    whose lanes' rate (the default policy) are in ``mode`` (None: no rates), each 10 000 per
    second: above what one claiming task reaches, so each claim pays the gate's full upkeep (a
    smooth log holds the newest 10 000 claims, and each claim pushes one and trims one), and
    the commands the engine ran inside each claim (exact whatever the load)."""
    queue = await Queue.connect(url, f"bench-modes-{time.time_ns()}", pool_size=1, events=False)
    if mode is not None:
        await queue.rate_limit(10_000, 1.0, mode=mode)  # type: ignore[arg-type]
        await queue.apply_policies(default=Policy(rate=Rate(10_000, 1.0, mode)))  # type: ignore[arg-type]
    for start in range(0, jobs, 1000):
        groups = [f"tenant{n % 20}" for n in range(start, start + 1000)]
        await queue.enqueue_many([Item(n, group=g) for n, g in enumerate(groups)])
    for _ in range(jobs // 2):  # the logs reach their working size first
        await queue.claim(600)
    await queue.wire.call("CONFIG", "RESETSTAT")
    for _ in range(jobs // 2):
        assert isinstance(await queue.claim(600), Job), "a claim found nothing: not measured"
    usec = await engine_usec_per_script(queue)
    claims, _ = await commandstats(queue)
    inner = await _inner_calls(queue)
    await discard(queue)
    await queue.close()
    return usec, inner / claims


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
    modes: dict[str, list[float]] = {}
    calls: dict[str, float] = {}
    for _ in range(runs):  # interleaved: a noisy host weighs on every mode alike
        for mode in (None, "fixed", "smooth"):
            usec, calls[mode or "no rates"] = await claim_usec(url, mode, jobs)
            modes.setdefault(mode or "no rates", []).append(usec)
    print(
        f"\nthe claim per rate mode: queue + every lane at 10 000/s, 20 lanes, median of {runs}\n"
    )
    print("| rate mode | engine µs per claim | commands inside per claim |")
    print("|---|---:|---:|")
    for name, values in modes.items():
        print(f"| {name} | {statistics.median(values):.1f} | {calls[name]:.2f} |")
    fixed, smooth = statistics.median(modes["fixed"]), statistics.median(modes["smooth"])
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

"""How many items one batch script call should carry: the measurement behind the engine's
``ADMIT_CHUNK`` and ``SETTLE_CHUNK``.

Run: ``.venv/bin/python bench/chunks.py [--runs 5] [--jobs 20000]``. For each chunk size,
``enqueue_many`` of ``--jobs`` items (16 lanes) and a drain by ``claim_batch(100)`` +
``complete_many``; jobs/s, client CPU µs per job and the server's µs per item (INFO
commandstats). Medians of ``--runs``, sizes interleaved within each run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from _harness import engine_usec_per_script, serve
from echomq import Item, Queue
from echomq.engine import transitions as _engine
from echomq.testing import discard

SIZES = (1, 10, 25, 50, 100, 200, 500)


async def _one(url: str, size: int, jobs: int) -> tuple[float, float, float, float]:
    _engine.ADMIT_CHUNK = _engine.SETTLE_CHUNK = size
    q = await Queue.connect(url, f"chunks-{size}-{time.time_ns()}", pool_size=1, events=False)
    items = [Item(n, lane=f"t{n % 16}") for n in range(jobs)]
    await q.wire.call("CONFIG", "RESETSTAT")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for start in range(0, jobs, 1000):
        await q.enqueue_many(items[start : start + 1000])
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    admit = (jobs / wall, cpu / jobs * 1e6, await engine_usec_per_script(q) / size)
    wall0 = time.perf_counter()
    while isinstance(batch := await q.claim_batch(100), list):
        await q.complete_many(batch)
    drain = jobs / (time.perf_counter() - wall0)
    await discard(q)
    return (*admit, drain)


async def run(url: str, runs: int, jobs: int) -> None:
    figures: dict[int, list[tuple[float, float, float, float]]] = {size: [] for size in SIZES}
    for _ in range(runs):
        for size in SIZES:
            figures[size].append(await _one(url, size, jobs))
    print(f"\n{jobs} jobs, 16 lanes, one connector, median of {runs} runs\n")
    print(
        "| items per call | enqueue_many jobs/s | client µs CPU/job | engine µs/item "
        "| drain jobs/s (claim_batch(100) + complete_many) |"
    )
    print("|---:|---:|---:|---:|---:|")
    for size, rows in figures.items():
        rate, cpu, usec, drain = (statistics.median(col) for col in zip(*rows, strict=True))
        print(f"| {size} | {rate:,.0f} | {cpu:.1f} | {usec:.2f} | {drain:,.0f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    return serve(parser, lambda url, args: run(url, args.runs, args.jobs))


if __name__ == "__main__":
    sys.exit(main())

"""Queue throughput on the embedded server: admission, drain, and the engine's own ceiling.

Run: ``.venv/bin/python bench/throughput.py [--runs 5] [--jobs 20000] [--url valkey://…]``.
Each figure is the median of ``--runs`` runs: jobs/s, and client CPU µs per job (this process
only). "engine µs/call" is the server's own time per script call (INFO commandstats), and
"engine ceiling" = 1e6 / that: what one single-threaded server could do with a free client.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

from _harness import engine_usec_per_script, serve
from echomq import Item, Job, Queue
from echomq.testing import discard

Case = Callable[[Queue, int], Awaitable[None]]


async def enqueue_one_task(q: Queue, jobs: int) -> None:
    for n in range(jobs):
        await q.enqueue(n, lane=f"t{n % 16}")


async def enqueue_50_tasks(q: Queue, jobs: int) -> None:
    async def task(k: int) -> None:
        for n in range(jobs // 50):
            await q.enqueue(n, lane=f"t{(k + n) % 16}")

    await asyncio.gather(*(task(k) for k in range(50)))


def enqueue_many(size: int) -> Case:
    async def case(q: Queue, jobs: int) -> None:
        for start in range(0, jobs, size):
            await q.enqueue_many([Item(n, lane=f"t{n % 16}") for n in range(start, start + size)])

    return case


async def drain_one_task(q: Queue, jobs: int) -> None:
    while isinstance(job := await q.claim(), Job):
        await q.complete(job)


async def drain_50_tasks(q: Queue, jobs: int) -> None:
    async def task() -> None:
        while isinstance(job := await q.claim(), Job):
            await q.complete(job)

    await asyncio.gather(*(task() for _ in range(50)))


async def drain_batches(q: Queue, jobs: int) -> None:
    async def task() -> None:
        while isinstance(batch := await q.claim_batch(50), list):
            await q.complete_many(batch)

    await asyncio.gather(*(task() for _ in range(4)))


ADMISSION: dict[str, Case] = {
    "enqueue, 1 task": enqueue_one_task,
    "enqueue, 50 tasks": enqueue_50_tasks,
    "enqueue_many(100)": enqueue_many(100),
    "enqueue_many(1000)": enqueue_many(1000),
}
DRAIN: dict[str, Case] = {
    "claim+complete, 1 task": drain_one_task,
    "claim+complete, 50 tasks": drain_50_tasks,
    "claim_batch(50)+complete_many, 4 tasks": drain_batches,
}


async def run(url: str, runs: int, jobs: int, pool: int) -> None:
    figures: dict[str, list[tuple[float, float, float]]] = {}
    for r in range(runs):
        q = await Queue.connect(url, f"bench-{r}-{time.time_ns()}", pool_size=pool, events=False)
        for cases in (ADMISSION, DRAIN):
            for name, case in cases.items():
                if cases is DRAIN:  # a fresh backlog for each drain
                    await enqueue_many(1000)(q, jobs)
                await q.wire.call("CONFIG", "RESETSTAT")
                cpu0, wall0 = time.process_time(), time.perf_counter()
                await case(q, jobs)
                wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
                figures.setdefault(name, []).append(
                    (jobs / wall, cpu / jobs * 1e6, await engine_usec_per_script(q))
                )
                if cases is ADMISSION:
                    await q.drain()
        await discard(q)
    print(f"{jobs} jobs per case, pool of {pool}, median of {runs} runs\n")
    print("| case | jobs/s | client µs CPU/job | engine µs/call | engine ceiling calls/s |")
    print("|---|---:|---:|---:|---:|")
    for name, rows in figures.items():
        rate, cpu, usec = (statistics.median(col) for col in zip(*rows, strict=True))
        print(f"| {name} | {rate:,.0f} | {cpu:.1f} | {usec:.1f} | {1e6 / usec:,.0f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--pool", type=int, default=2)
    return serve(parser, lambda url, args: run(url, args.runs, args.jobs, args.pool))


if __name__ == "__main__":
    sys.exit(main())

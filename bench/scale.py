"""Cost as work grows: the engine's time per script against the size of what it holds.

Run: ``.venv/bin/python bench/scale.py [--runs 3] [--big 1000000] [--label new] [--url valkey://…]``
(``--big 100000`` for a quick run). Four tables, each case on a fresh queue:

1. enqueue, claim and complete against the number of lanes (10, 1,000, 100,000), each lane
   holding pending jobs;
2. the same against the number of pending jobs (1,000 and ``--big``) in 16 lanes;
3. promote with ``--big`` scheduled jobs: when all are due (``promote(1000)`` until all moved),
   when none is (all an hour away), and on an empty schedule;
4. the engine's memory per pending job beyond its payload (``INFO memory`` before and after).

"µs/call" is the server's own time per script call (``INFO commandstats``, ``cmdstat_evalsha``,
after ``CONFIG RESETSTAT``): no client, no network. Each queue is filled once (not timed, with
``enqueue_many`` in batches of 1,000), then measured in ``--runs`` windows; figures are medians
of the windows. A window is ``--calls`` enqueues (50 tasks), then as many claims (50 tasks, the
jobs kept so no complete runs inside the claims' window), then their completes: the depth is the
same after a window as before it. Every script gets dearer while the server holds a large data
set, whoever's keys they are, so tables 2 and 3 add a control: a small queue measured while the
big one is on the server. What the big queue costs beyond its control is the queue's own.
Only the public API is used, so the script runs unchanged against another checkout:
``PYTHONPATH=/path/to/old/src .venv/bin/python bench/scale.py --label old``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import echomq
from _harness import commandstats, serve
from echomq import Item, Job, Queue
from echomq.testing import discard

BATCH = 1000  # items per enqueue_many while filling
IN_FLIGHT = 4  # enqueue_many batches in flight while filling
TASKS = 50  # concurrent tasks in a measured window
LANE_COUNTS = (10, 1_000, 100_000)
COLUMNS = (
    "enqueue µs/call | claim µs/call | complete µs/call "
    "| enqueue_many µs/job | claim_batch(100) µs/job | complete_many µs/job"
)
LANE_FILL = 200_000  # pending jobs spread over the lanes: the same total for every lane count
DEPTH_LANES = 16
PROMOTE_LIMIT = 1000
IDLE_PROMOTES = 200  # promote calls per window when nothing is due
MEMORY_PAYLOAD = "x" * 98  # 100 bytes once JSON-encoded (the quotes)
SERIAL = itertools.count()


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else math.nan


async def engine_window(queue: Queue, work: Callable[[], Awaitable[object]]) -> tuple[int, float]:
    """Run ``work`` between a ``CONFIG RESETSTAT`` and a read of the stats: (calls, µs)."""
    await queue.wire.call("CONFIG", "RESETSTAT")
    await work()
    return await commandstats(queue)


def per_call(stats: tuple[int, float]) -> float:
    calls, usec = stats
    return usec / calls if calls else math.nan


async def info_field(queue: Queue, section: str, name: str) -> int:
    info = (await queue.wire.call("INFO", section)).decode()
    for line in info.splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    raise LookupError(f"INFO {section} has no {name}")


async def fresh(url: str, args: argparse.Namespace, case: str) -> Queue:
    # Short names: the name is in every row's key, so it is in the memory per job.
    name = f"{case}-{os.getpid()}-{next(SERIAL)}"
    return await Queue.connect(url, name, pool_size=args.pool, events=False)


async def fill(
    queue: Queue, total: int, lanes: int, *, delay: float | None = None, payload: object = None
) -> None:
    """Admit ``total`` jobs over lanes ``g0…`` (job i in lane i % lanes), not timed."""

    async def batch(start: int) -> None:
        items = [
            Item(i if payload is None else payload, lane=f"g{i % lanes}", delay=delay)
            for i in range(start, min(start + BATCH, total))
        ]
        for verdict in await queue.enqueue_many(items):
            if verdict.kind not in ("enqueued", "scheduled"):
                raise RuntimeError(f"fill: {verdict!r}")

    starts = range(0, total, BATCH)
    for k in range(0, len(starts), IN_FLIGHT):
        await asyncio.gather(*(batch(s) for s in starts[k : k + IN_FLIGHT]))


async def spread(n: int, step: Callable[[int], Awaitable[None]]) -> None:
    """Run ``step(0…n-1)`` over ``TASKS`` concurrent tasks (pipelined on the wire)."""

    async def task(k: int) -> None:
        for i in range(k, n, TASKS):
            await step(i)

    await asyncio.gather(*(task(k) for k in range(TASKS)))


async def window(queue: Queue, lanes: int, calls: int, offset: int) -> tuple[float, float, float]:
    """One window: enqueue, claim and complete µs per script call, each measured on its own.
    The enqueues go to lanes from ``offset`` on, so no lane empties over the windows."""
    claimed: list[Job] = []

    async def enqueue(i: int) -> None:
        verdict = await queue.enqueue(i, lane=f"g{(offset + i) % lanes}")
        if verdict.kind != "enqueued":
            raise RuntimeError(f"enqueue: {verdict!r}")

    async def claim(i: int) -> None:
        job = await queue.claim()
        if not isinstance(job, Job):
            raise RuntimeError(f"claim: expected a job, got {job!r}")
        claimed.append(job)

    async def complete(i: int) -> None:
        if not await queue.complete(claimed[i]):
            raise RuntimeError(f"complete: {claimed[i].id} was gone")

    enq = await engine_window(queue, lambda: spread(calls, enqueue))
    clm = await engine_window(queue, lambda: spread(calls, claim))
    cmp = await engine_window(queue, lambda: spread(calls, complete))
    return per_call(enq), per_call(clm), per_call(cmp)


def per_job(stats: tuple[int, float], jobs: int) -> float:
    return stats[1] / jobs


async def batch_window(
    queue: Queue, lanes: int, jobs: int, offset: int
) -> tuple[float, float, float]:
    """One window of the batch calls: ``enqueue_many``, ``claim_batch(100)`` and
    ``complete_many`` of ``jobs`` jobs, in the engine's µs per job (whatever the design sends
    per call: per-item scripts before, one script per chunk after)."""
    items = [Item(i, lane=f"g{(offset + i) % lanes}") for i in range(jobs)]
    claimed: list[Job] = []

    async def enqueue() -> None:
        for start in range(0, jobs, 1000):
            await queue.enqueue_many(items[start : start + 1000])

    async def claim() -> None:
        while len(claimed) < jobs:
            batch = await queue.claim_batch(min(100, jobs - len(claimed)))
            if not isinstance(batch, list):
                raise RuntimeError(f"claim_batch: expected jobs, got {batch!r}")
            claimed.extend(batch)

    async def complete() -> None:
        for start in range(0, jobs, 1000):
            await queue.complete_many(claimed[start : start + 1000])

    enq = await engine_window(queue, enqueue)
    clm = await engine_window(queue, claim)
    cmp = await engine_window(queue, complete)
    return per_job(enq, jobs), per_job(clm, jobs), per_job(cmp, jobs)


async def windows(queue: Queue, lanes: int, calls: int, runs: int) -> tuple[float, ...]:
    """Medians over ``runs`` windows: enqueue, claim and complete µs per script call, then
    enqueue_many, claim_batch and complete_many µs per job."""
    warm = await queue.claim()  # loads the claim and complete scripts outside any window
    if isinstance(warm, Job):
        await queue.complete(warm)
        await queue.enqueue(0, lane="g0")
    figures = [
        (
            *await window(queue, lanes, calls, r * calls),
            *await batch_window(queue, lanes, calls, (runs + r) * calls),
        )
        for r in range(runs)
    ]
    return tuple(median(col) for col in zip(*figures, strict=True))


async def by_lanes(url: str, args: argparse.Namespace) -> None:
    rows = []
    queues = []
    for lanes in LANE_COUNTS:
        queue = await fresh(url, args, f"lanes{lanes}")
        pending = lanes * max(2, LANE_FILL // lanes)
        await fill(queue, pending, lanes)
        rows.append((f"{lanes:,}", pending, *await windows(queue, lanes, args.calls, args.runs)))
        queues.append(queue)
    # The control: the 10-lane queue again, with every other queue still on the server. What
    # the many-lane queue costs beyond it is the lanes', not the data set's.
    lanes = LANE_COUNTS[0]
    case = f"{lanes:,}, beside the others"
    rows.append((case, LANE_FILL, *await windows(queues[0], lanes, args.calls, args.runs)))
    for queue in queues:
        await discard(queue)
    print(f"\n{header(args)}: enqueue / claim / complete against the number of lanes\n")
    print(f"| lanes | pending | {COLUMNS} |")
    print("|---|---:|" + "---:|" * 6)
    for case, pending, *cells in rows:
        print(f"| {case} | {pending:,} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")


async def by_depth(url: str, args: argparse.Namespace) -> None:
    rows: list[tuple[Any, ...]] = []

    async def small(case: str) -> None:
        queue = await fresh(url, args, "depth1000")
        await fill(queue, 1_000, DEPTH_LANES)
        rows.append((case, *await windows(queue, DEPTH_LANES, args.calls, args.runs)))
        await discard(queue)

    await small("1,000")
    big = await fresh(url, args, f"depth{args.big}")
    await fill(big, args.big, DEPTH_LANES)
    rows.append((f"{args.big:,}", *await windows(big, DEPTH_LANES, args.calls, args.runs)))
    # The control: a small queue while the big one is on the server. What it gains over the
    # first row is the server's, not the queue's (every script slows on a large dataset).
    await small(f"1,000 beside {args.big:,} in another queue")
    await discard(big)
    print(f"\n{header(args)}: enqueue / claim / complete against the pending jobs, 16 lanes\n")
    print(f"| pending | {COLUMNS} |")
    print("|---|" + "---:|" * 6)
    for case, *cells in rows:
        print(f"| {case} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")


async def promotes(queue: Queue, calls: int) -> tuple[int, int, float]:
    """``calls`` sequential ``promote(1000)`` (fewer once one moves nothing, when any did):
    (calls made, jobs moved, engine µs)."""
    moved = made = 0

    async def work() -> None:
        nonlocal moved, made
        for _ in range(calls):
            n = await queue.promote(PROMOTE_LIMIT)
            made += 1
            moved += n
            if n == 0 and moved:
                break

    _, usec = await engine_window(queue, work)
    return made, moved, usec


async def by_schedule(url: str, args: argparse.Namespace) -> None:
    rows: list[tuple[str, int, int, float, float, float]] = []

    # All due: promote(1000) until every job moved, cut into --runs windows.
    queue = await fresh(url, args, "due")
    await fill(queue, args.big, DEPTH_LANES, delay=0.5)
    await asyncio.sleep(0.6)  # each delay counts from its own enqueue: all are due now
    await queue.promote(1)  # loads the script outside any window
    left, per_window = args.big - 1, math.ceil(args.big / PROMOTE_LIMIT / args.runs)
    figures = []
    while left > 0:
        made, moved, usec = await promotes(queue, per_window)
        if moved == 0:
            break
        left -= moved
        figures.append((made, moved / made, usec / made, usec / moved))
    if left:
        print(f"(promote left {left:,} due jobs unmoved)", file=sys.stderr)
    calls = sum(f[0] for f in figures)
    per, usec, per_job = (median(f[k] for f in figures) for k in (1, 2, 3))
    rows.append(("all due", args.big, calls, per, usec, per_job))
    await discard(queue)

    # None due: every job an hour away; the same beside it on an empty queue (the control, as
    # in by_depth); and an empty queue alone.
    async def idle(queue: Queue, case: str, scheduled: int) -> None:
        await queue.promote(1)
        figures = []
        for _ in range(args.runs):
            made, moved, usec = await promotes(queue, IDLE_PROMOTES)
            if moved:
                raise RuntimeError(f"promote moved {moved} jobs that were not due")
            figures.append(usec / made)
        rows.append((case, scheduled, IDLE_PROMOTES * args.runs, 0.0, median(figures), math.nan))

    future = await fresh(url, args, "future")
    await fill(future, args.big, DEPTH_LANES, delay=3600)
    await idle(future, "none due (all in 1 h)", args.big)
    empty = await fresh(url, args, "empty")
    await idle(empty, f"nothing scheduled, beside {args.big:,} in another queue", 0)
    await discard(future)
    await lazyfree_settled(empty)
    await idle(empty, "nothing scheduled", 0)
    await discard(empty)

    print(f"\n{header(args)}: promote({PROMOTE_LIMIT}) against the scheduled jobs, 16 lanes\n")
    print("| case | scheduled | promote calls | jobs moved/call | µs/call | µs/job moved |")
    print("|---|---:|---:|---:|---:|---:|")
    for case, scheduled, calls, per, usec, per_job in rows:
        job = "—" if math.isnan(per_job) else f"{per_job:.2f}"
        print(f"| {case} | {scheduled:,} | {calls:,} | {per:,.0f} | {usec:,.1f} | {job} |")


async def lazyfree_settled(queue: Queue) -> None:
    """Wait until the server's background frees (lazyfree) are done: they move used_memory."""
    for _ in range(300):
        if await info_field(queue, "memory", "lazyfree_pending_objects") == 0:
            return
        await asyncio.sleep(0.1)


async def queue_keys(queue: Queue) -> list[str]:
    pattern, cursor, keys = f"emq:{{{queue.name}}}:*", b"0", []
    while True:
        cursor, batch = await queue.wire.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
        keys += [k.decode() for k in batch]
        if cursor in (b"0", "0", 0):
            return keys


async def by_memory(url: str, args: argparse.Namespace) -> None:
    jobs, key_length = args.memory_jobs, 0
    figures = []
    for _ in range(args.runs):
        queue = await fresh(url, args, "mem")
        size = len(queue.codec.encode(MEMORY_PAYLOAD))
        # One job per lane first: the queue's own keys, the lanes and the scripts exist before
        # the first reading, so the difference is what each further job costs.
        await fill(queue, DEPTH_LANES, DEPTH_LANES, payload=MEMORY_PAYLOAD)
        await lazyfree_settled(queue)
        before = await info_field(queue, "memory", "used_memory")
        await fill(queue, jobs, DEPTH_LANES, payload=MEMORY_PAYLOAD)
        after = await info_field(queue, "memory", "used_memory")
        one = await queue.enqueue(MEMORY_PAYLOAD, lane="g0")
        row_key = f"emq:{{{queue.name}}}:job:{one.id}"
        row_bytes = int(await queue.wire.call("MEMORY", "USAGE", row_key, "SAMPLES", "0"))
        keys = await queue_keys(queue)
        usage = await asyncio.gather(
            *(queue.wire.call("MEMORY", "USAGE", k, "SAMPLES", "0") for k in keys)
        )
        rows_total = sum(int(u or 0) for k, u in zip(keys, usage, strict=True) if ":job:" in k)
        rest = sum(int(u or 0) for k, u in zip(keys, usage, strict=True) if ":job:" not in k)
        total = jobs + DEPTH_LANES + 1
        per_job = (after - before) / jobs
        figures.append((size, per_job, per_job - size, row_bytes, rows_total / total, rest / total))
        key_length = len(row_key)
        await discard(queue)
    payload, delta, beyond, row, mean_row, others = (median(c) for c in zip(*figures, strict=True))
    print(
        f"\n{header(args)}: engine memory per pending job ({jobs:,} jobs, 16 lanes, "
        f"row keys of {key_length} bytes)\n"
    )
    print(
        "| payload B | used_memory Δ B/job | beyond the payload B/job "
        "| MEMORY USAGE one row B | mean row B | other keys B/job |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    figures_row = f"{payload:.0f} | {delta:.1f} | {beyond:.1f} | {row:.0f} | {mean_row:.1f}"
    print(f"| {figures_row} | {others:.1f} |")


def header(args: argparse.Namespace) -> str:
    label = f"[{args.label}] " if args.label else ""
    return f"{label}median of {args.runs} window(s)"


async def run(url: str, args: argparse.Namespace) -> None:
    print(f"echomq from {echomq.__file__}" + (f" ({args.label})" if args.label else ""))
    print(f"pool of {args.pool}, {args.calls:,} calls per window, {TASKS} tasks")
    started = time.perf_counter()
    for section in (by_lanes, by_depth, by_schedule, by_memory):
        await section(url, args)
    print(f"\n{time.perf_counter() - started:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="measured windows per case")
    parser.add_argument("--big", type=int, default=1_000_000, help="the large job count")
    parser.add_argument("--calls", type=int, default=2000, help="calls per measured window")
    parser.add_argument("--memory-jobs", type=int, default=10_000)
    parser.add_argument("--pool", type=int, default=2)
    parser.add_argument("--label", default="", help="printed in each header, e.g. old / new")
    return serve(parser, run)


if __name__ == "__main__":
    sys.exit(main())

"""The task layer's cost over the raw ``Queue``: the same jobs enqueued and drained both ways.

Run: ``.venv/bin/python bench/tasks.py [--runs 5] [--jobs 20000]``. Per run, on fresh queues of
the same server: enqueue ``--jobs`` jobs (sequential awaits, and one ``enqueue_many``), then
drain them with one consumer of concurrency 64 and a no-op handler. The raw side keeps results
for as long as the App does (``result_ttl`` 1 day), so both pay the same engine work and the
difference is the task layer's own: binding and checking arguments, the task envelope, routing
by name, the context, and rebuilding the result. Prints medians (jobs/s) and the overhead.

``--batch`` adds a third side: the same jobs as members of a batch task (``Batching(max_size=64,
max_wait=0.05)``, a no-op handler that returns no verdicts), drained by one ``AppWorker``: the
batch consumer's path.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from _harness import serve
from echomq import App, AppWorker, Batching, Consumer, ConsumerOptions, Item, Job, Member, Queue
from echomq.testing import discard

TTL = 86400.0
CONCURRENCY = 64


async def _raw(url: str, jobs: int, bulk: bool) -> tuple[float, float]:
    queue = await Queue.connect(url, f"bench-raw-{time.time_ns()}", result_ttl=TTL)
    try:
        start = time.perf_counter()
        if bulk:
            await queue.enqueue_many(
                [Item({"tenant": f"t{n % 16}", "n": n}, lane=f"t{n % 16}") for n in range(jobs)]
            )
        else:
            for n in range(jobs):
                await queue.enqueue({"tenant": f"t{n % 16}", "n": n}, lane=f"t{n % 16}")
        enqueued = jobs / (time.perf_counter() - start)

        async def noop(job: Job) -> int:
            return 0

        consumer = Consumer(queue, noop, ConsumerOptions(concurrency=CONCURRENCY))
        start = time.perf_counter()
        runner = asyncio.ensure_future(consumer.run())
        while (await queue.counts()).completed < jobs:
            await asyncio.sleep(0.01)
        drained = jobs / (time.perf_counter() - start)
        consumer.stop()
        await runner
        return enqueued, drained
    finally:
        await discard(queue)


async def _tasks(url: str, jobs: int, bulk: bool) -> tuple[float, float]:
    name = f"bench-app-{time.time_ns()}"
    app = App(url, queue=name, result_ttl=TTL)

    @app.task(lane="tenant")
    async def noop(tenant: str, n: int) -> int:
        return 0

    async with app:
        start = time.perf_counter()
        if bulk:
            await app.enqueue_many([noop.call(f"t{n % 16}", n) for n in range(jobs)])
        else:
            for n in range(jobs):
                await noop.enqueue(f"t{n % 16}", n)
        enqueued = jobs / (time.perf_counter() - start)
        start = time.perf_counter()
        await AppWorker(app, options=ConsumerOptions(concurrency=CONCURRENCY)).run_until_idle()
        drained = jobs / (time.perf_counter() - start)
        await discard(app.queue(name))
    return enqueued, drained


async def _batch_tasks(url: str, jobs: int, bulk: bool) -> tuple[float, float]:
    name = f"bench-batch-{time.time_ns()}"
    app = App(url, queue=name, result_ttl=TTL)

    @app.task(
        lane=lambda item: f"t{item % 16}", batch=Batching(max_size=CONCURRENCY, max_wait=0.05)
    )
    async def rows(items: list[Member[int]]) -> None:
        return None  # every member done

    async with app:
        start = time.perf_counter()
        if bulk:
            await app.enqueue_many([rows.call(n) for n in range(jobs)])
        else:
            for n in range(jobs):
                await rows.enqueue(n)
        enqueued = jobs / (time.perf_counter() - start)
        start = time.perf_counter()
        await AppWorker(app, options=ConsumerOptions(concurrency=CONCURRENCY)).run_until_idle()
        drained = jobs / (time.perf_counter() - start)
        await discard(app.queue(name))
    return enqueued, drained


async def run(url: str, args: argparse.Namespace) -> None:
    sides: dict[str, Callable[[str, int, bool], Awaitable[tuple[float, float]]]] = {
        "raw Queue": _raw,
        "tasks": _tasks,
    }
    if args.batch:
        sides["batch task"] = _batch_tasks
    for bulk in (False, True):
        samples: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        for _ in range(args.runs):
            for side, measure in sides.items():  # interleaved: drift hits both sides alike
                samples[side].append(await measure(url, args.jobs, bulk))
        how = "enqueue_many" if bulk else "sequential enqueue"
        print(
            f"\n{args.jobs} jobs, {how}, then drained (concurrency {CONCURRENCY}); "
            f"median of {args.runs} runs\n"
        )
        print("| side | enqueue jobs/s | drain jobs/s |")
        print("|---|---:|---:|")
        medians = {}
        for side, rows in samples.items():
            enq = statistics.median(r[0] for r in rows)
            drain = statistics.median(r[1] for r in rows)
            medians[side] = (enq, drain)
            print(f"| {side} | {enq:,.0f} | {drain:,.0f} |")
        raw, tasks = medians["raw Queue"], medians["tasks"]
        print(
            f"\ntask layer overhead: enqueue {100 * (raw[0] / tasks[0] - 1):+.1f}%, "
            f"drain {100 * (raw[1] / tasks[1] - 1):+.1f}% (time per job, vs raw)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--batch", action="store_true", help="add a batch task's drain")
    return serve(parser, run)


if __name__ == "__main__":
    raise SystemExit(main())

"""The task layer's cost over the raw ``Queue``: the same jobs enqueued and drained both ways.

Run: ``.venv/bin/python bench/tasks.py [--runs 5] [--jobs 20000]``. Per run, on fresh queues of
the same server, each side twice (A B B A): enqueue ``--jobs`` jobs (sequential awaits, and one
``enqueue_many``), then drain them with one consumer of concurrency 64 and a no-op handler.
The raw side keeps results for as long as the App does (``result_ttl`` 1 day), so both pay
the same engine work and the difference is the task layer's own: binding and checking
arguments, the task envelope, routing by name, the context, and rebuilding the result.

Both drains end the same way: an observer counts the settled jobs and the clock stops at the
last one (the raw side once polled ``counts()`` every 10 ms, a load and a lag the task side,
``run_until_idle``, did not have). The task side is ``AppWorker.run``, what ``echomq worker
mod:app`` runs. Prints medians (jobs/s), the client process's CPU per job (``process_time``:
steadier than the clock on a shared machine, and the part the task layer adds to) and the
overhead.

``--batch`` adds a third side: the same jobs as members of a batch task (``Batching(max_size=64,
max_wait=0.05)``, a no-op handler that returns no verdicts), drained by one ``AppWorker``: the
batch consumer's path.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

from _harness import serve
from echomq import App, AppWorker, Batching, Consumer, ConsumerOptions, Item, Job, Member, Queue
from echomq.testing import discard

TTL = 86400.0
CONCURRENCY = 64

#: One run of one side: enqueue jobs/s, drain jobs/s, client CPU µs per job enqueued, drained.
Sample = tuple[float, float, float, float]


class Settled:
    """An observer that sets ``done`` once ``jobs`` jobs settled: both sides' end of a drain."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.count = 0
        self.done = asyncio.Event()

    def claimed(self, queue: str, jobs: Sequence[Job], lease_ms: int) -> None:
        pass

    def settled(self, queue: str, job: Job, outcome: str) -> None:
        self.count += 1
        if self.count >= self.jobs:
            self.done.set()


class Clock:
    """Wall and client-CPU time of one phase."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def rates(self, jobs: int) -> tuple[float, float]:
        """jobs/s, and client CPU µs per job."""
        return jobs / self.wall, self.cpu / jobs * 1e6


async def _raw(url: str, jobs: int, bulk: bool) -> Sample:
    queue = await Queue.connect(url, f"bench-raw-{time.time_ns()}", result_ttl=TTL)
    try:
        with Clock() as enqueue:
            if bulk:
                await queue.enqueue_many(
                    [Item({"tenant": f"t{n % 16}", "n": n}, lane=f"t{n % 16}") for n in range(jobs)]
                )
            else:
                for n in range(jobs):
                    await queue.enqueue({"tenant": f"t{n % 16}", "n": n}, lane=f"t{n % 16}")

        async def noop(job: Job) -> int:
            return 0

        settled = Settled(jobs)
        options = ConsumerOptions(concurrency=CONCURRENCY)
        consumer = Consumer(queue, noop, options, observer=settled)
        with Clock() as drain:
            runner = asyncio.ensure_future(consumer.run())
            await settled.done.wait()
        consumer.stop()
        await runner
        return _sample(jobs, enqueue, drain)
    finally:
        await discard(queue)


async def _tasks(url: str, jobs: int, bulk: bool) -> Sample:
    name = f"bench-app-{time.time_ns()}"
    app = App(url, queue=name, result_ttl=TTL)

    @app.task(lane="tenant")
    async def noop(tenant: str, n: int) -> int:
        return 0

    async with app:
        with Clock() as enqueue:
            if bulk:
                await app.enqueue_many([noop.call(f"t{n % 16}", n) for n in range(jobs)])
            else:
                for n in range(jobs):
                    await noop.enqueue(f"t{n % 16}", n)
        drain = await _drain(app, jobs)
        await discard(app.queue(name))
    return _sample(jobs, enqueue, drain)


async def _drain(app: App, jobs: int) -> Clock:
    """Drain ``jobs`` with ``AppWorker.run`` (what ``echomq worker mod:app`` runs), the clock
    stopped by the observer of the last settle."""
    settled = Settled(jobs)
    worker = AppWorker(app, options=ConsumerOptions(concurrency=CONCURRENCY), observer=settled)
    with Clock() as drain:
        runner = asyncio.ensure_future(worker.run())
        await settled.done.wait()
    worker.stop()
    await runner
    return drain


def _sample(jobs: int, enqueue: Clock, drain: Clock) -> Sample:
    (enqueued, enqueue_cpu), (drained, drain_cpu) = enqueue.rates(jobs), drain.rates(jobs)
    return enqueued, drained, enqueue_cpu, drain_cpu


async def _batch_tasks(url: str, jobs: int, bulk: bool) -> Sample:
    name = f"bench-batch-{time.time_ns()}"
    app = App(url, queue=name, result_ttl=TTL)

    @app.task(
        lane=lambda item: f"t{item % 16}", batch=Batching(max_size=CONCURRENCY, max_wait=0.05)
    )
    async def rows(items: list[Member[int]]) -> None:
        return None  # every member done

    async with app:
        with Clock() as enqueue:
            if bulk:
                await app.enqueue_many([rows.call(n) for n in range(jobs)])
            else:
                for n in range(jobs):
                    await rows.enqueue(n)
        drain = await _drain(app, jobs)
        await discard(app.queue(name))
    return _sample(jobs, enqueue, drain)


async def run(url: str, args: argparse.Namespace) -> None:
    sides: dict[str, Callable[[str, int, bool], Awaitable[Sample]]] = {
        "raw Queue": _raw,
        "tasks": _tasks,
    }
    if args.batch:
        sides["batch task"] = _batch_tasks
    for bulk in (False, True):
        samples: dict[str, list[Sample]] = {side: [] for side in sides}
        order = list(sides.items())
        for _ in range(args.runs):
            # Interleaved, each run both ways round (A B B A): drift hits both sides alike, and
            # so does going second (on a busy host the side after the other's delete measured
            # up to 20% slower, whichever it was).
            for side, measure in order + order[::-1]:
                samples[side].append(await measure(url, args.jobs, bulk))
        how = "enqueue_many" if bulk else "sequential enqueue"
        print(
            f"\n{args.jobs} jobs, {how}, then drained (concurrency {CONCURRENCY}); "
            f"median of {2 * args.runs} samples ({args.runs} runs, each side measured twice)\n"
        )
        print(
            "| side | enqueue jobs/s | drain jobs/s | enqueue client µs/job | drain client µs/job |"
        )
        print("|---|---:|---:|---:|---:|")
        medians = {}
        for side, rows in samples.items():
            m = tuple(statistics.median(r[i] for r in rows) for i in range(4))
            medians[side] = m
            print(f"| {side} | {m[0]:,.0f} | {m[1]:,.0f} | {m[2]:.1f} | {m[3]:.1f} |")
        raw, tasks = medians["raw Queue"], medians["tasks"]
        wall = [100 * (raw[i] / tasks[i] - 1) for i in (0, 1)]  # time per job, vs raw
        cpu = [100 * (tasks[i] / raw[i] - 1) for i in (2, 3)]
        print(
            f"\ntask layer overhead (time per job, vs raw): enqueue {wall[0]:+.1f}%, "
            f"drain {wall[1]:+.1f}%; client CPU per job: enqueue {cpu[0]:+.1f}%, "
            f"drain {cpu[1]:+.1f}%"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--batch", action="store_true", help="add a batch task's drain")
    return serve(parser, run)


if __name__ == "__main__":
    raise SystemExit(main())

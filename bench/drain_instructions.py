"""The drain's CPU instructions per job, raw ``Queue`` against the task worker: a count that a
shared, noisy host does not blur (wall and CPU time per job swing ±20% there; the count
repeats within a fraction of a percent).

Run: ``.venv/bin/python bench/drain_instructions.py [--jobs 1000 5000]`` (needs valgrind). For
each side (a ``Consumer`` with a no-op handler over a dict payload; ``AppWorker.run`` over a
no-op task, as bench/tasks.py drains them) and each job count, a fresh process fills a queue of
an embedded server, then a second process, under ``valgrind --tool=cachegrind``, drains it; the
difference between the two counts' instructions, over the difference in jobs, is the drain's
per job (start-up and imports cancel out). Slow: ~30 s per drain under valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

from echomq.server import EmbeddedValkey

HERE = os.path.dirname(os.path.abspath(__file__))
VALGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]

SIDE = r"""
import asyncio, sys
sys.path.insert(0, BENCH)
from tasks import CONCURRENCY, TTL, Settled
from echomq import App, AppWorker, Consumer, ConsumerOptions, Item, Queue
mode, side, url, name, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

async def main():
    settled = Settled(n)
    if side == "raw":
        queue = await Queue.connect(url, name, result_ttl=TTL)
        if mode == "fill":
            await queue.enqueue_many(
                [Item({"tenant": f"t{k % 16}", "n": k}, lane=f"t{k % 16}") for k in range(n)]
            )
        else:
            async def noop(job):
                return 0
            options = ConsumerOptions(concurrency=CONCURRENCY)
            consumer = Consumer(queue, noop, options, observer=settled)
            runner = asyncio.ensure_future(consumer.run())
            await settled.done.wait()
            consumer.stop()
            await runner
        await queue.close()
        return
    app = App(url, queue=name, result_ttl=TTL)

    @app.task(lane="tenant", name="noop")
    async def noop(tenant: str, n: int) -> int:
        return 0

    async with app:
        if mode == "fill":
            await app.enqueue_many([noop.call(f"t{k % 16}", k) for k in range(n)])
        else:
            options = ConsumerOptions(concurrency=CONCURRENCY)
            worker = AppWorker(app, options=options, observer=settled)
            runner = asyncio.ensure_future(worker.run())
            await settled.done.wait()
            worker.stop()
            await runner

asyncio.run(main())
""".replace("BENCH", repr(HERE))


def instructions(side: str, url: str, jobs: int) -> int:
    name = f"bench-ir-{side}-{time.time_ns()}"
    run = [sys.executable, "-c", SIDE]
    subprocess.run([*run, "fill", side, url, name, str(jobs)], check=True)
    drained = subprocess.run(
        [*VALGRIND, *run, "drain", side, url, name, str(jobs)],
        check=True,
        capture_output=True,
        text=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", drained.stderr)
    assert found, drained.stderr[-2000:]
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, nargs=2, default=[1000, 5000])
    args = parser.parse_args()
    low, high = args.jobs
    with EmbeddedValkey() as server:
        print(f"embedded valkey {server.version}; drains of {low} and {high} jobs per side\n")
        per_job = {}
        for side in ("raw", "tasks"):
            counts = [instructions(side, server.url, jobs) for jobs in (low, high)]
            per_job[side] = (counts[1] - counts[0]) / (high - low)
        print("| side | instructions per job drained |")
        print("|---|---:|")
        for side, count in per_job.items():
            print(f"| {'raw Queue' if side == 'raw' else 'tasks'} | {count:,.0f} |")
        raw, tasks = per_job["raw"], per_job["tasks"]
        share = 100 * (tasks / raw - 1)
        print(f"\ntask worker over raw: {tasks - raw:+,.0f} instructions a job ({share:+.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

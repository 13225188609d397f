"""What tracing costs: the same jobs enqueued and drained by today's echomq (the tree before
tracing came) and by this tree three ways: no tracer provider (the path of every untraced
application, the ``otel`` extra installed), OpenTelemetry imported but no provider set (a look
for one at most once a second), and traced (a provider whose spans go nowhere: the spans' own
cost, no exporter's). A second copy of today's tree runs as a side of its own: what two
identical sides differ by is the run's noise.

Run: ``.venv/bin/python bench/tracing.py [--runs 9] [--jobs 5000]``. Each sample is a fresh
process (the tree under test on its ``PYTHONPATH``) against the same server: ``--jobs`` task
calls enqueued by 16 coroutines at once (the client's CPU per enqueue, not a round trip's
latency), then drained by an ``AppWorker`` (concurrency 64, a no-op task). Every round runs
each side once, in an order rotated round by round (the first of a round measured slower), so
drift and order hit the sides alike; prints the medians (jobs/s, and the client process's CPU
per job, which a loaded machine disturbs far less than the wall clock) and each side's CPU per
job against today's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from _harness import serve

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 64
#: Enqueuers at once: the client's CPU per enqueue is measured, not one round trip's latency.
PRODUCERS = 16


def before_tracing() -> str:
    """The commit before the one that brought ``echomq/tracing.py``."""
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "src/echomq/tracing.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return f"{added[-1]}^"


def checkout(rev: str, into: Path) -> Path:
    """``src/`` of ``rev``, written under ``into``."""
    archive = subprocess.run(
        ["git", "archive", rev, "src"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def sample(src: Path, url: str, jobs: int, mode: str) -> list[float]:
    """One child process's enqueue jobs/s and CPU s/job, then the drain's."""
    env = dict(os.environ, PYTHONPATH=str(src))
    command = [sys.executable, __file__, "--child", "--url", url, "--jobs", str(jobs)]
    done = subprocess.run(
        [*command, "--mode", mode],
        env=env, capture_output=True, text=True, check=True, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    figures = json.loads(done.stdout.splitlines()[-1])
    return [*figures["enqueue"], *figures["drain"]]


async def child(url: str, jobs: int, mode: str) -> None:
    if mode != "off":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        if mode == "traced":  # recording spans, no processor: no export
            trace.set_tracer_provider(TracerProvider())
    from echomq import App, AppWorker, ConsumerOptions
    from echomq.testing import discard

    name = f"bench-tracing-{time.time_ns()}"
    app = App(url, queue=name)

    @app.task(lane="tenant")
    async def noop(tenant: str, n: int) -> int:
        return 0

    async def produce(first: int) -> None:
        for n in range(first, jobs, PRODUCERS):
            await noop.enqueue(f"t{n % 16}", n)

    async with app:
        # Warm: the queue opened, its id node leased and the first look for a tracer made (it
        # imports opentelemetry: tens of ms, once a process) before the clock starts.
        await noop.enqueue("warm", -1)
        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(produce(first) for first in range(PRODUCERS)))
        enqueue = (jobs / (time.perf_counter() - wall), (time.process_time() - cpu) / jobs)
        wall, cpu = time.perf_counter(), time.process_time()
        await AppWorker(app, options=ConsumerOptions(concurrency=CONCURRENCY)).run_until_idle()
        done = jobs + 1  # the warm one too
        drain = (done / (time.perf_counter() - wall), (time.process_time() - cpu) / done)
        await discard(app.queue(name))
    print(json.dumps({"enqueue": enqueue, "drain": drain}))


async def run(url: str, args: argparse.Namespace) -> None:
    rev = args.before or before_tracing()
    with tempfile.TemporaryDirectory() as scratch, tempfile.TemporaryDirectory() as again:
        today = checkout(rev, Path(scratch))
        here = ROOT / "src"
        sides = {
            "today": (today, "off"),
            "today, again (the noise)": (checkout(rev, Path(again)), "off"),
            "no tracer": (here, "off"),
            "OpenTelemetry imported, no provider": (here, "imported"),
            "traced": (here, "traced"),
        }
        samples: dict[str, list[list[float]]] = {side: [] for side in sides}
        order = list(sides)
        for round in range(args.runs):
            turn = round % len(order)
            for side in order[turn:] + order[:turn]:
                src, mode = sides[side]
                samples[side].append(sample(src, url, args.jobs, mode))
    print(
        f"\n{args.jobs} task calls enqueued ({PRODUCERS} at once), then drained (concurrency "
        f"{CONCURRENCY}); median of {args.runs} runs; today = {rev}\n"
    )
    print(
        "| side | enqueue jobs/s | enqueue CPU µs/job | drain jobs/s | drain CPU µs/job "
        "| CPU per job vs today (enqueue, drain) |"
    )
    print("|---|---:|---:|---:|---:|---|")
    medians = {
        side: [statistics.median(row[i] for row in rows) for i in range(4)]
        for side, rows in samples.items()
    }
    base = medians["today"]
    for side, (enq, enq_cpu, drain, drain_cpu) in medians.items():
        delta = f"{100 * (enq_cpu / base[1] - 1):+.1f}%, {100 * (drain_cpu / base[3] - 1):+.1f}%"
        print(
            f"| {side} | {enq:,.0f} | {1e6 * enq_cpu:.1f} | {drain:,.0f} | "
            f"{1e6 * drain_cpu:.1f} | {delta} |"
        )


def main() -> int:
    if "--child" in sys.argv:  # one sample, against the parent's server
        one = argparse.ArgumentParser()
        one.add_argument("--child", action="store_true")
        one.add_argument("--mode", choices=("off", "imported", "traced"))
        one.add_argument("--url")
        one.add_argument("--jobs", type=int)
        args = one.parse_args()
        asyncio.run(child(args.url, args.jobs, args.mode))
        return 0
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--before", help="the revision that is 'today' (default: before tracing)")
    return serve(parser, run)


if __name__ == "__main__":
    raise SystemExit(main())

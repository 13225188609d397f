"""The batch-native engine's targets, for whichever echomq is on the import path.

Run: ``.venv/bin/python bench/targets.py --url valkey://…`` (or without ``--url`` for an
embedded server); ``bench/versus.py`` runs it alternately for two checkouts on one server.
Prints one JSON line of figures:

* ``single``: sequential enqueue, one producer awaiting each call (jobs/s);
* ``bulk``: ``enqueue_many`` in batches of 1,000 (jobs/s);
* ``drain_default`` / ``drain_batch50`` / ``drain_single``: one ``echomq worker`` process,
  concurrency 10, default options / ``--batch 50`` / ``--batch 1``, no-op jobs; timed from the
  first completion to the last, so process start-up is not counted (jobs/s);
* ``p50_ms`` / ``p99_ms``: enqueue → handler start at a steady 200 jobs/s for 5 s, a parked
  worker process of concurrency 10.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import serve
from echomq import Item, Queue
from echomq.testing import discard

BENCH = Path(__file__).resolve().parent
RATE, SECONDS = 200.0, 5.0


def _fresh(kind: str) -> str:
    return f"tg-{kind}-{time.time_ns()}"


async def single(url: str, calls: int) -> float:
    queue = await Queue.connect(url, _fresh("single"))
    for n in range(200):
        await queue.enqueue(n, lane=f"t{n % 16}")
    start = time.perf_counter()
    for n in range(calls):
        await queue.enqueue(n, lane=f"t{n % 16}")
    rate = calls / (time.perf_counter() - start)
    await discard(queue)
    return rate


async def bulk(url: str, jobs: int) -> float:
    queue = await Queue.connect(url, _fresh("bulk"))
    await queue.enqueue_many([Item(0)])
    start = time.perf_counter()
    for first in range(0, jobs, 1000):
        await queue.enqueue_many([Item(n, lane=f"t{n % 16}") for n in range(first, first + 1000)])
    rate = jobs / (time.perf_counter() - start)
    await discard(queue)
    return rate


def _worker(
    url: str, name: str, handler: str, extra: list[str], env: dict[str, str]
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-c", "import sys; from echomq.cli import main; sys.exit(main())"]
    command += ["--url", url, "worker", f"_handlers:{handler}", "--queue", name]
    command += ["--concurrency", "10", *extra]
    paths = [str(BENCH), os.environ.get("PYTHONPATH", "")]
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **env}
    return subprocess.Popen(command, env=full, stdout=subprocess.DEVNULL)


async def _until(queue: Queue, completed: int, process: subprocess.Popen[bytes]) -> int:
    """Poll the completed counter until it reaches ``completed``; fail if the worker died."""
    while (done := (await queue.counts()).completed) < completed:
        if process.poll() is not None:
            raise RuntimeError(f"the worker exited with {process.returncode}")
        await asyncio.sleep(0.002)
    return done


async def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    while process.poll() is None:
        await asyncio.sleep(0.02)


async def drain(url: str, jobs: int, extra: list[str]) -> float:
    name = _fresh("drain")
    queue = await Queue.connect(url, name)
    for first in range(0, jobs, 1000):
        await queue.enqueue_many([Item(n) for n in range(first, min(jobs, first + 1000))])
    process = _worker(url, name, "noop", extra, {})
    try:
        first_seen = await _until(queue, 1, process)
        start = time.perf_counter()
        done = await _until(queue, jobs, process)
        rate = (done - first_seen) / (time.perf_counter() - start)
    finally:
        await _stop(process)
        await discard(queue)
    return rate


async def latency(url: str) -> tuple[float, float]:
    name = _fresh("latency")
    queue = await Queue.connect(url, name)
    with tempfile.TemporaryDirectory() as folder:
        samples_file = Path(folder) / "samples"
        process = _worker(url, name, "timed", [], {"BENCH_SAMPLES": str(samples_file)})
        try:
            await queue.enqueue(time.monotonic())  # the worker is up once this one is done
            await _until(queue, 1, process)
            await asyncio.sleep(0.5)  # parked again
            total = int(RATE * SECONDS)
            began = time.monotonic()
            for n in range(total):
                await asyncio.sleep(max(0.0, began + n / RATE - time.monotonic()))
                await queue.enqueue(time.monotonic())
            await _until(queue, total + 1, process)
        finally:
            await _stop(process)
            await discard(queue)
        samples = [float(line) for line in samples_file.read_text().split()][1:]
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples) * 1e3, cuts[98] * 1e3


async def run(url: str, args: argparse.Namespace) -> None:
    figures: dict[str, float] = {
        "single": await single(url, args.calls),
        "bulk": await bulk(url, args.jobs * 2),
        "drain_default": await drain(url, args.jobs, []),
        "drain_batch50": await drain(url, args.jobs, ["--batch", "50"]),
        "drain_single": await drain(url, args.jobs, ["--batch", "1"]),
    }
    figures["p50_ms"], figures["p99_ms"] = await latency(url)
    print(json.dumps(figures))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=20_000)
    return serve(parser, run)


if __name__ == "__main__":
    sys.exit(main())

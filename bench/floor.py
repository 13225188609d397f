"""echomq against the floor: the cheapest pipeline that carries the same jobs, in one run.

Run: ``.venv/bin/python bench/floor.py [--runs 5] [--jobs 20000] [--calls 5000] [--url …]``.
Three sides on one server, interleaved within each run so the host's noise hits them alike,
each doing the same job body (``bench/_floor_jobs.py``: append a timestamp to a list):

* **floor**: no framework. The producer ``LPUSH``es a JSON triple ``[id, name, args]``; one
  asyncio worker process ``RPOP key 10``, runs the popped bodies concurrently, ``BRPOP`` when
  empty. No leases, no acks, no fairness: a reference, not a competitor;
* **echomq Queue**: ``Queue.enqueue`` / ``enqueue_many``, drained by ``echomq worker
  _floor_jobs:stamp`` (the raw ``Queue`` consumer);
* **echomq tasks**: ``task.enqueue`` / ``App.enqueue_many``, drained by ``echomq worker
  _floor_jobs:app`` (the task worker);
* **echomq batch** (with ``--batch``): the same through a batch task, drained by ``echomq
  worker _floor_jobs:batch_app`` (the batch consumer, batches of up to 100).

Figures (jobs/s): **single**, ``--calls`` enqueues one awaited call at a time (the floor: one
``LPUSH``); **bulk**, ``--jobs`` in batches of 1,000 (the floor: 1,000 ``LPUSH`` pipelined in
one write); **drain**, ``--jobs`` waiting, one worker process (``--processes N`` adds the
echomq sides drained by ``echomq worker --processes N``) at concurrency 10 on the loop
``--loop auto`` picks (uvloop when installed), timed from the first body to the last. Prints
the medians and each as a fraction of the floor.
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
from collections.abc import Awaitable, Callable
from pathlib import Path

from _floor_jobs import make_app, make_batch_app
from _harness import serve
from echomq import Item, Queue
from echomq.consumers import loops
from echomq.testing import discard
from echomq.wire.connector import Connector
from echomq.wire.url import ConnectionOptions

BENCH = Path(__file__).resolve().parent
CONCURRENCY = 10
SIDES = ("floor", "echomq Queue", "echomq tasks")
Figures = dict[str, float]


def _fresh(kind: str) -> str:
    return f"floor-{kind}-{time.time_ns()}"


def _env(extra: dict[str, str], src: str | None = None) -> dict[str, str]:
    paths = [str(BENCH), src or os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **extra}


def _rates(stamps: Path, jobs: int) -> tuple[float, float]:
    """(jobs/s from the first body to the last, the workers' CPU µs per job meanwhile): every
    worker process wrote ``stamps.<pid>``; their CPU adds up."""
    values: list[float] = []
    cpu = 0.0
    for path in stamps.parent.glob(f"{stamps.name}.*"):
        spent, _, rest = path.read_text().partition("\n")
        first, last = (float(s) for s in spent.split())
        cpu += last - first
        values += (float(line) for line in rest.split())
    values.sort()
    if len(values) != jobs:
        raise RuntimeError(f"{len(values)} of {jobs} bodies ran")
    return (jobs - 1) / (values[-1] - values[0]), cpu * 1e6 / (jobs - 1)


async def _server_usec(conn: Connector) -> float:
    """The server's µs in commands since the last ``CONFIG RESETSTAT`` (INFO commandstats)."""
    info = (await conn.call("INFO", "commandstats")).decode()
    total = 0.0
    for line in info.splitlines():
        if line.startswith("cmdstat_") and not line.startswith(("cmdstat_info", "cmdstat_config")):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            total += float(fields["usec"])
    return total


def _triple(n: int) -> bytes:
    return json.dumps([n, "stamp", [n]]).encode()


async def _drained(
    url: str,
    command: list[str],
    env: dict[str, str],
    jobs: int,
    queue: Queue | None,
    src: str | None = None,
) -> Figures:
    """Run a worker process until ``jobs`` bodies ran (the floor exits by itself; an echomq
    worker is stopped once the queue counts them completed): its rate, its CPU µs per job and
    the server's µs per job (every command, the polling of the counts included)."""
    stats = await Connector(ConnectionOptions.from_url(url), version_fence=None).connect()
    await stats.call("CONFIG", "RESETSTAT")
    with tempfile.TemporaryDirectory() as folder:
        stamps = Path(folder) / "stamps"
        process = _spawn(command, _env({**env, "BENCH_STAMPS": str(stamps)}, src))
        try:
            if queue is not None:
                while (await queue.counts()).completed < jobs:
                    if process.poll() is not None:
                        raise RuntimeError(f"the worker exited with {process.returncode}")
                    await asyncio.sleep(0.05)
                process.send_signal(signal.SIGTERM)
            while process.poll() is None:
                await asyncio.sleep(0.02)
        finally:
            if process.poll() is None:
                process.kill()
            server = await _server_usec(stats) / jobs
            await stats.close()
        drain, cpu = _rates(stamps, jobs)
    return {"drain": drain, "cpu_us": cpu, "server_us": server}


def _spawn(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)


def _python(args: argparse.Namespace, side: str, command: list[str]) -> list[str]:
    """``command`` run by this interpreter; under cProfile with ``--profile DIR``."""
    if args.profile is None:
        return [sys.executable, *command]
    Path(args.profile).mkdir(parents=True, exist_ok=True)
    return [sys.executable, "-m", "cProfile", "-o", f"{args.profile}/{side}.prof", *command]


def _cli(url: str, target: str, extra: list[str], processes: int = 1) -> list[str]:
    command = ["-m", "echomq", "--url", url, "worker", target, *extra]
    if processes > 1:
        command += ["--processes", str(processes)]
    return [*command, "--concurrency", str(CONCURRENCY), "--log-level", "WARNING"]


async def floor(url: str, args: argparse.Namespace) -> Figures:
    options = ConnectionOptions.from_url(url)
    conn = await Connector(options, version_fence=None).connect()
    key = _fresh("list")
    try:
        for n in range(200):
            await conn.call("LPUSH", key, _triple(n))
        await conn.call("DEL", key)
        start = time.perf_counter()
        for n in range(args.calls):
            await conn.call("LPUSH", key, _triple(n))
        single = args.calls / (time.perf_counter() - start)
        await conn.call("DEL", key)
        start = time.perf_counter()
        for first in range(0, args.jobs, 1000):
            await conn.call_many([("LPUSH", key, _triple(n)) for n in range(first, first + 1000)])
        bulk = args.jobs / (time.perf_counter() - start)
        command = [str(BENCH / "_floor_jobs.py"), url, key, str(args.jobs)]
        drained = await _drained(url, _python(args, "floor", command), {}, args.jobs, None)
    finally:
        await conn.call("DEL", key)
        await conn.close()
    return {"single": single, "bulk": bulk, **drained}


async def raw(
    url: str, args: argparse.Namespace, src: str | None = None, processes: int = 1
) -> Figures:
    queue = await Queue.connect(url, _fresh("queue"))
    try:
        for n in range(200):
            await queue.enqueue(n)
        start = time.perf_counter()
        for n in range(args.calls):
            await queue.enqueue(n)
        single = args.calls / (time.perf_counter() - start)
    finally:
        await discard(queue)
    name = _fresh("queue")
    queue = await Queue.connect(url, name)
    try:
        start = time.perf_counter()
        for first in range(0, args.jobs, 1000):
            await queue.enqueue_many([Item(n) for n in range(first, first + 1000)])
        bulk = args.jobs / (time.perf_counter() - start)
        command = _cli(url, "_floor_jobs:stamp", ["--queue", name], processes)
        command = _python(args, "queue", command)
        drained = await _drained(url, command, {}, args.jobs, queue, src)
    finally:
        await discard(queue)
    return {"single": single, "bulk": bulk, **drained}


async def tasks(
    url: str, args: argparse.Namespace, src: str | None = None, processes: int = 1
) -> Figures:
    return await _app_side(url, args, src, "stamp", processes)


async def batches(url: str, args: argparse.Namespace, src: str | None = None) -> Figures:
    return await _app_side(url, args, src, "stamps")


async def _app_side(
    url: str, args: argparse.Namespace, src: str | None, which: str, processes: int = 1
) -> Figures:
    """The task side (``stamp``, one job at a time) or the batch side (``stamps``)."""
    make, target, side = (
        (make_app, "app", "tasks") if which == "stamp" else (make_batch_app, "batch_app", "batch")
    )
    name = _fresh("app")
    app = make(url, name)
    task = app.tasks[which]
    async with app:
        try:
            for n in range(200):
                await task.enqueue(n)
            start = time.perf_counter()
            for n in range(args.calls):
                await task.enqueue(n)
            single = args.calls / (time.perf_counter() - start)
        finally:
            await discard(app.queue(name))
    name = _fresh("app")
    app = make(url, name)
    task = app.tasks[which]
    async with app:
        try:
            start = time.perf_counter()
            for first in range(0, args.jobs, 1000):
                await app.enqueue_many([task.call(n) for n in range(first, first + 1000)])
            bulk = args.jobs / (time.perf_counter() - start)
            command = _cli(url, f"_floor_jobs:{target}", [], processes)
            command = _python(args, side, command)
            env = {"BENCH_QUEUE": name}
            drained = await _drained(url, command, env, args.jobs, app.queue(name), src)
        finally:
            await discard(app.queue(name))
    return {"single": single, "bulk": bulk, **drained}


async def run(url: str, args: argparse.Namespace) -> None:
    measures: dict[str, Callable[[str, argparse.Namespace], Awaitable[Figures]]] = {
        "floor": floor,
        "echomq Queue": raw,
        "echomq tasks": tasks,
    }
    if args.batch:
        measures["echomq batch"] = batches
    if args.against:  # the same sides, their workers from another checkout
        against = args.against  # a path from this folder: the workers start here too
        measures[f"Queue @{args.against}"] = lambda u, a: raw(u, a, against)
        measures[f"tasks @{args.against}"] = lambda u, a: tasks(u, a, against)
        if args.batch:
            measures[f"batch @{args.against}"] = lambda u, a: batches(u, a, against)
    if args.processes > 1:  # the same sides drained by N worker processes
        n = args.processes
        measures[f"echomq Queue, {n} processes"] = lambda u, a: raw(u, a, None, n)
        measures[f"echomq tasks, {n} processes"] = lambda u, a: tasks(u, a, None, n)
    loop_name, _ = loops.choose("auto")
    samples: dict[str, list[Figures]] = {side: [] for side in measures}
    for r in range(args.runs):
        for side, measure in measures.items():
            samples[side].append(await measure(url, args))
            print(f"run {r + 1} {side}: {json.dumps(samples[side][-1])}", file=sys.stderr)
    medians = {
        side: {key: statistics.median(f[key] for f in rows) for key in rows[0]}
        for side, rows in samples.items()
    }
    print(
        f"\nmedians of {args.runs} runs; single: {args.calls:,} awaited calls; bulk and drain: "
        f"{args.jobs:,} jobs; drain: one worker process (unless the side says), concurrency "
        f"{CONCURRENCY}, "
        f"event loop {loop_name}\n"
    )
    print("| side | single enqueue | bulk enqueue (×1000) | drain |\n|---|---:|---:|---:|")
    base = medians["floor"]
    for side, figures in medians.items():
        cells = []
        for key in ("single", "bulk", "drain"):
            share = "" if side == "floor" else f" ({100 * figures[key] / base[key]:.0f}%)"
            cells.append(f"{figures[key]:,.0f}{share}")
        print(f"| {side} | {' | '.join(cells)} |")
    print(
        "\n| drain, per job | wall µs | worker CPU µs | server µs (every command) |\n"
        "|---|---:|---:|---:|"
    )
    for side, figures in medians.items():
        print(
            f"| {side} | {1e6 / figures['drain']:.1f} | {figures['cpu_us']:.1f} "
            f"| {figures['server_us']:.1f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=5_000)
    parser.add_argument(
        "--against", help="another checkout's src: its workers drain too (enqueue is this one's)"
    )
    parser.add_argument("--batch", action="store_true", help="add a batch task's side")
    parser.add_argument(
        "--processes", type=int, default=1, help="add the echomq sides drained by N processes"
    )
    parser.add_argument(
        "--profile", help="a folder: run each worker under cProfile, one SIDE.prof per side"
    )
    return serve(parser, run)


if __name__ == "__main__":
    sys.exit(main())

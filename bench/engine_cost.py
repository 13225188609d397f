"""The engine's own µs per job in claim.lua and complete.lua, as a worker drives them.

Run: ``.venv/bin/python bench/engine_cost.py [--runs 5] [--jobs 20000] [--against OTHER/src]``.
Each workload fills a fresh queue (``enqueue_many``, not measured), then drains it the way
``echomq worker`` does: ``claim_batch(BATCH)``, then ``complete_many`` of what it leased. Around
every claim and every complete the server's ``INFO commandstats`` is read, so each script's share
is exact to the call: the server's µs inside ``EVALSHA`` (no client, no network), divided by the
jobs, and the commands the script ran inside (exact, whatever the host's load). Workloads:

* **1 lane, rows deleted**: the ``Queue`` worker's drain (``result_ttl`` 0, the default);
* **1 lane, results kept**: the task worker's (an ``App`` keeps results a day);
* **16 lanes, rows deleted**: a batch walks the ring across lanes (one job of each per turn);
* **single claim + complete**: ``claim()`` then ``complete()``, one job a call.

Every side runs in its own process on the same server (``--url``, or the embedded one this
script starts), the sides interleaved within each run so the host's noise weighs on them alike;
``--against`` adds a side whose ``echomq`` (and so whose Lua) is another checkout's. Figures are
medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _harness import OUTSIDE, serve
from echomq import Item, Job, Queue
from echomq.testing import discard

BENCH = Path(__file__).resolve().parent
BATCH = 10  # the worker's claim size at its default concurrency
LANES = 16
KEPT_MS = 86_400_000  # an App's result_ttl
WORKLOADS = ("1 lane, rows deleted", "1 lane, results kept", "16 lanes, rows deleted", "single")
Figures = dict[str, float]


async def _stats(queue: Queue) -> tuple[float, int]:
    """(µs inside EVALSHA, commands run inside scripts) since the server started."""
    info = (await queue.wire.call("INFO", "commandstats")).decode()
    usec, inner = 0.0, 0
    for line in info.splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, rest = line.removeprefix("cmdstat_").split(":", 1)
        fields = dict(kv.split("=") for kv in rest.split(","))
        if name == "evalsha":
            usec = float(fields["usec"])
        elif name not in OUTSIDE:
            inner += int(fields["calls"])
    return usec, inner


async def _drain(url: str, workload: str, jobs: int) -> Figures:
    kept = workload == "1 lane, results kept"
    lanes = LANES if workload.startswith("16") else 1
    queue = await Queue.connect(
        url, f"engine-cost-{time.time_ns()}", events=False, result_ttl=KEPT_MS / 1000 if kept else 0
    )
    try:
        for first in range(0, jobs, 1000):
            await queue.enqueue_many(
                [Item(n, lane=f"t{n % lanes}") for n in range(first, min(jobs, first + 1000))]
            )
        claim = [0.0, 0]  # µs, inner commands
        complete = [0.0, 0]
        done = calls = 0
        while done < jobs:
            before = await _stats(queue)
            if workload == "single":
                job = await queue.claim()
                batch = [job] if isinstance(job, Job) else []
            else:
                leased = await queue.claim_batch(BATCH)
                batch = leased if isinstance(leased, list) else []
            middle = await _stats(queue)
            if not batch:
                raise RuntimeError(f"a claim found nothing after {done} of {jobs} jobs")
            if workload == "single":
                await queue.complete(batch[0])
            else:
                await queue.complete_many(batch)
            after = await _stats(queue)
            for total, start, end in ((claim, before, middle), (complete, middle, after)):
                total[0] += end[0] - start[0]
                total[1] += end[1] - start[1]
            done, calls = done + len(batch), calls + 1
    finally:
        await discard(queue)
    return {
        "claim_us": claim[0] / jobs,
        "complete_us": complete[0] / jobs,
        "claim_cmds": claim[1] / jobs,
        "complete_cmds": complete[1] / jobs,
        "jobs_per_call": jobs / calls,
    }


async def _side(url: str, jobs: int) -> None:
    """One side's figures for every workload, as one JSON line (run in a child process)."""
    figures = {w: await _drain(url, w, jobs) for w in WORKLOADS}
    print(json.dumps(figures))


async def _child(url: str, jobs: int, src: str) -> dict[str, Figures]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BENCH), src])}
    command = [sys.executable, str(Path(__file__)), "--url", url, "--jobs", str(jobs), "--side"]
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=subprocess.PIPE, stderr=None
    )
    out, _ = await process.communicate()
    if process.returncode:
        raise RuntimeError(f"the side on {src} exited with {process.returncode}")
    return json.loads(out.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


async def run(url: str, args: argparse.Namespace) -> None:
    if args.side:
        await _side(url, args.jobs)
        return
    here = str(BENCH.parent / "src")
    sides = {"this tree": here}
    if args.against:
        sides[f"@{args.against}"] = args.against
    samples: dict[str, list[dict[str, Figures]]] = {side: [] for side in sides}
    for r in range(args.runs):
        order = list(sides.items()) if r % 2 == 0 else list(reversed(sides.items()))
        for side, src in order:
            samples[side].append(await _child(url, args.jobs, src))
            print(f"run {r + 1} {side}: {json.dumps(samples[side][-1])}", file=sys.stderr)
    print(
        f"\nmedians of {args.runs} runs, {args.jobs:,} jobs a workload, claim_batch({BATCH}) + "
        f"complete_many; µs = the server's own time inside EVALSHA, per job; cmds = commands "
        f"the script ran inside, per job\n"
    )
    print(
        "| workload | side | claim µs | complete µs | claim + complete µs | claim cmds "
        "| complete cmds |\n|---|---|---:|---:|---:|---:|---:|"
    )
    for workload in WORKLOADS:
        for side, rows in samples.items():
            cells = [_median(rows, workload, key) for key in ("claim_us", "complete_us", "both")]
            counts = [_median(rows, workload, key) for key in ("claim_cmds", "complete_cmds")]
            print(
                f"| {workload} | {side} | {' | '.join(f'{c:.1f}' for c in cells)} "
                f"| {' | '.join(f'{c:.2f}' for c in counts)} |"
            )


def _median(rows: list[dict[str, Figures]], workload: str, key: str) -> float:
    if key == "both":
        return statistics.median(r[workload]["claim_us"] + r[workload]["complete_us"] for r in rows)
    return statistics.median(r[workload][key] for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--against", help="another checkout's src: its Lua measured too")
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    return serve(parser, run)


if __name__ == "__main__":
    sys.exit(main())

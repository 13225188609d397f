"""The engine's own µs and commands per admitted item in enqueue.lua, unsharded and on a shard.

Run: ``.venv/bin/python bench/admission_cost.py [--runs 5] [--jobs 10000] [--against OTHER/src]``.
Sides: **unsharded** (a queue's enqueue as every producer sends it), **on a shard** (the same
items with the fence of docs/concepts/shards.md: the call opens with ``fence`` and the epoch,
each item carries its lane slot, and the shard owns every lane slot: a 1-shard map's shard 0,
so every item is admitted), and with ``--against`` the unsharded side of another checkout's
enqueue.lua (linked the same way, loaded on the same server). Around every call the server's
``INFO commandstats`` is read: the server's µs inside ``EVALSHA`` (no client, no network) and
the commands the script ran inside, per item. The sides take turns in blocks of ``BLOCK`` calls
on queues of their own; figures are medians of ``--runs``. Workloads: a chunk of 100 items on
one lane, a chunk of 100 over 16 lanes, and single items (one call each).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

from _harness import linked_scripts, script_stats, serve
from echomq import Queue
from echomq.engine import ids
from echomq.engine.options import Admission, admission_argv
from echomq.engine.shards import ShardMap
from echomq.testing import discard

BENCH = Path(__file__).resolve().parent
BLOCK = 10  # calls per side before the next side's turn
#: name: (items per call, lanes)
WORKLOADS: dict[str, tuple[int, int]] = {
    "chunks of 100, 1 lane": (100, 1),
    "chunks of 100, 16 lanes": (100, 16),
    "single": (1, 16),
}
_serial = itertools.count(1 << 40)


async def _workload(
    url: str, sides: dict[str, tuple[str, bool]], workload: str, jobs: int
) -> dict[str, tuple[float, float]]:
    per_call, lanes = WORKLOADS[workload]
    queues: dict[str, Queue] = {}
    maps: dict[str, ShardMap] = {}
    for side, (_, fenced) in sides.items():
        queue = await Queue.connect(url, f"admission-cost-{time.time_ns()}", events=False)
        queues[side] = queue
        if fenced:
            maps[side] = ShardMap.create(queue.name, 1)
            await queue.wire.call_many(maps[side].fence_commands(0))
    totals = {side: [0.0, 0.0, 0.0] for side in sides}  # µs, commands, items
    try:
        while any(total[2] < jobs for total in totals.values()):
            for side, (sha, _) in sides.items():
                queue, total = queues[side], totals[side]
                for _ in range(BLOCK):
                    if total[2] >= jobs:
                        break
                    done = int(total[2])
                    items = [
                        Admission(ids.encode("JOB", next(_serial)), b'"x"', f"t{n % lanes}")
                        for n in range(done, done + per_call)
                    ]
                    shard_map = maps.get(side)
                    fence = None if shard_map is None else shard_map.fence(i.group for i in items)
                    argv = admission_argv(items, fence)
                    before = await script_stats(queue)
                    got = await queue.wire.call("EVALSHA", sha, 1, queue.keys.root, *argv)
                    after = await script_stats(queue)
                    if got[0] != 1:
                        raise RuntimeError(f"{side}: an item was not admitted ({got[:3]!r})")
                    total[0] += after[0] - before[0]
                    total[1] += after[1] - before[1]
                    total[2] += per_call
    finally:
        for side, queue in queues.items():
            if side in maps:
                await queue.wire.call("DEL", queue.keys.owns, queue.keys.moved)
            await discard(queue)
    return {side: (t[0] / t[2], t[1] / t[2]) for side, t in totals.items()}


async def run(url: str, args: argparse.Namespace) -> None:
    sources = {"this tree": BENCH.parent / "src"}
    if args.against:
        sources[f"@{args.against}"] = Path(args.against)
    probe = await Queue.connect(url, "admission-cost-probe", events=False)
    shas = {
        side: (
            await probe.wire.call("SCRIPT", "LOAD", linked_scripts(src, ("enqueue",))["enqueue"])
        ).decode()
        for side, src in sources.items()
    }
    await probe.close()
    sides = {"unsharded": (shas["this tree"], False), "on a shard": (shas["this tree"], True)}
    if args.against:
        sides[f"unsharded @{args.against}"] = (shas[f"@{args.against}"], False)
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {
        w: {s: [] for s in sides} for w in WORKLOADS
    }
    for r in range(args.runs):
        for workload in WORKLOADS:
            jobs = args.jobs if WORKLOADS[workload][0] > 1 else args.jobs // 5
            figures = await _workload(url, sides, workload, jobs)
            for side, row in figures.items():
                samples[workload][side].append(row)
            print(f"run {r + 1} {workload}: {figures}", file=sys.stderr)
    print(
        f"\nmedians of {args.runs} runs, {args.jobs:,} items a workload ({args.jobs // 5:,} for "
        "single); µs = the server's own time inside EVALSHA per item; cmds = commands the "
        "script ran inside per item\n"
    )
    print("| workload | side | enqueue µs | enqueue cmds |\n|---|---|---:|---:|")
    for workload, by_side in samples.items():
        for side, rows in by_side.items():
            usec = statistics.median(row[0] for row in rows)
            cmds = statistics.median(row[1] for row in rows)
            print(f"| {workload} | {side} | {usec:.2f} | {cmds:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--against", help="another checkout's src: its enqueue.lua measured too")
    return serve(parser, run)


if __name__ == "__main__":
    sys.exit(main())

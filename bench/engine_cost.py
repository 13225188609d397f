"""The engine's own µs per job in claim.lua and complete.lua, as a worker drives them.

Run: ``.venv/bin/python bench/engine_cost.py [--runs 5] [--jobs 10000] [--against OTHER/src]``.
Each workload fills a fresh queue per side (``enqueue_many``, not measured), then drains it the
way ``echomq worker`` does: a claim of ``BATCH`` jobs (``EVALSHA`` of claim.lua), then one
complete of what it leased (complete.lua). Around every claim and every complete the server's
``INFO commandstats`` is read, so each script's share is exact to the call: the server's µs
inside ``EVALSHA`` (no client, no network), divided by the jobs, and the commands the script
ran inside (exact, whatever the host's load). Workloads:

* **1 lane, rows deleted**: the ``Queue`` worker's drain (``result_ttl`` 0, the default);
* **1 lane, results kept**: the task worker's (an ``App`` keeps results a day);
* **16 lanes, rows deleted**: a batch walks the ring across lanes (one job of each per turn);
* **16 lanes at ceiling 1**: every job takes its lane off the ring (the claim) and back on (the
  complete): the ring's churn, at its worst;
* **batches of 50**: a bigger ``--concurrency``; **single**: one job a claim and a complete.

``--against`` adds a side whose scripts are another checkout's ``echomq/engine/lua``, linked
the same way and loaded on the same server (their claim and complete must answer alike). The
sides take turns in blocks of ``BLOCK`` claims on their own queues, so the host's noise weighs
on them alike; figures are medians of ``--runs``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _harness import linked_scripts, script_stats, serve
from echomq import Item, Queue
from echomq.testing import discard

BENCH = Path(__file__).resolve().parent
LANES = 16
KEPT_MS = 86_400_000  # an App's result_ttl
BLOCK = 10  # claims per side before the other side's turn
LEASE_MS = 600_000
#: name: (jobs per claim, lanes, ms a completed row is kept, each lane's ceiling or None)
WORKLOADS: dict[str, tuple[int, int, int, int | None]] = {
    "1 lane, rows deleted": (10, 1, 0, None),
    "1 lane, results kept": (10, 1, KEPT_MS, None),
    "16 lanes, rows deleted": (10, LANES, 0, None),
    "16 lanes at ceiling 1": (10, LANES, 0, 1),
    "batches of 50": (50, 1, 0, None),
    "single": (1, 1, 0, None),
}
COLUMNS = ("claim_us", "complete_us", "both_us", "claim_cmds", "complete_cmds")
Figures = dict[str, float]


async def _workload(
    url: str, shas: dict[str, tuple[str, str]], workload: str, jobs: int
) -> dict[str, Figures]:
    want, lanes, kept, ceiling = WORKLOADS[workload]
    queues = {}
    for side in shas:
        queue = await Queue.connect(url, f"engine-cost-{time.time_ns()}", events=False)
        for first in range(0, jobs, 1000):
            await queue.enqueue_many(
                [Item(n, lane=f"t{n % lanes}") for n in range(first, min(jobs, first + 1000))]
            )
        for lane in range(lanes if ceiling else 0):
            await queue.lane(f"t{lane}").limit(ceiling)
        queues[side] = queue
    totals = {side: [0.0, 0.0, 0, 0, 0] for side in shas}  # µs, µs, cmds, cmds, jobs
    try:
        while any(total[4] < jobs for total in totals.values()):
            for side, (claim, complete) in shas.items():
                queue, total = queues[side], totals[side]
                root = f"emq:{{{queue.name}}}:"
                for _ in range(BLOCK):
                    if total[4] >= jobs:
                        break
                    before = await script_stats(queue)
                    got = await queue.wire.call("EVALSHA", claim, 1, root, LEASE_MS, want)
                    middle = await script_stats(queue)
                    if not isinstance(got, list) or len(got) < 6:
                        raise RuntimeError(f"{side}: a claim found nothing ({got!r})")
                    words: list[bytes | str | int] = [kept]
                    for i in range(2, len(got), 4):
                        words += [got[i], got[i + 2], b"", 0]  # id, token, result, ran: 0
                    await queue.wire.call("EVALSHA", complete, 1, root, *words)
                    after = await script_stats(queue)
                    total[0] += middle[0] - before[0]
                    total[1] += after[0] - middle[0]
                    total[2] += middle[1] - before[1]
                    total[3] += after[1] - middle[1]
                    total[4] += (len(got) - 2) // 4
    finally:
        for queue in queues.values():
            await discard(queue)
    return {
        side: {
            "claim_us": t[0] / t[4],
            "complete_us": t[1] / t[4],
            "both_us": (t[0] + t[1]) / t[4],
            "claim_cmds": t[2] / t[4],
            "complete_cmds": t[3] / t[4],
        }
        for side, t in totals.items()
    }


async def run(url: str, args: argparse.Namespace) -> None:
    sides = {"this tree": BENCH.parent / "src"}
    if args.against:
        sides[f"@{args.against}"] = Path(args.against)
    probe = await Queue.connect(url, "engine-cost-probe", events=False)
    shas: dict[str, tuple[str, str]] = {}
    for side, src in sides.items():
        linked = linked_scripts(src, ("claim", "complete"))
        loaded = [await probe.wire.call("SCRIPT", "LOAD", linked[n]) for n in ("claim", "complete")]
        shas[side] = (loaded[0].decode(), loaded[1].decode())
    await probe.close()
    samples: dict[str, dict[str, list[Figures]]] = {w: {s: [] for s in sides} for w in WORKLOADS}
    for r in range(args.runs):
        for workload in WORKLOADS:
            jobs = args.jobs if WORKLOADS[workload][0] > 1 else args.jobs // 5
            figures = await _workload(url, shas, workload, jobs)
            for side, row in figures.items():
                samples[workload][side].append(row)
            print(f"run {r + 1} {workload}: {figures}", file=sys.stderr)
    print(
        f"\nmedians of {args.runs} runs, {args.jobs:,} jobs a workload ({args.jobs // 5:,} for "
        f"single); µs = the server's own time inside EVALSHA per job; cmds = commands the "
        f"script ran inside per job\n"
    )
    print(
        "| workload | side | claim µs | complete µs | claim + complete µs | claim cmds "
        "| complete cmds |\n|---|---|---:|---:|---:|---:|---:|"
    )
    for workload, by_side in samples.items():
        for side, rows in by_side.items():
            cells = [statistics.median(row[key] for row in rows) for key in COLUMNS]
            print(
                f"| {workload} | {side} | {cells[0]:.1f} | {cells[1]:.1f} | {cells[2]:.1f} "
                f"| {cells[3]:.2f} | {cells[4]:.2f} |"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--against", help="another checkout's src: its Lua measured too")
    return serve(parser, run)


if __name__ == "__main__":
    sys.exit(main())

"""Commands the engine runs inside its scripts per job, from ``INFO commandstats``: a cost figure
that the machine's load cannot blur (the counts are exact), for whichever echomq is imported.

Run: ``.venv/bin/python bench/commands.py [--jobs 2000] [--ordered]``; compare two checkouts
with ``PYTHONPATH=<checkout>/src`` each. Three workloads on 16 lanes: single claims each
completed at once, ``claim_batch(50)`` + ``complete_many``, and an enqueue into a new lane
(the path that asks whether the lane is serviceable).
"""

from __future__ import annotations

import argparse
import sys
import time

from _harness import inner_calls, serve
from echomq import Job, Queue
from echomq.testing import discard


async def run(url: str, args: argparse.Namespace) -> None:
    queue = await Queue.connect(url, f"commands-{time.time_ns()}", events=False)
    if args.ordered:
        await queue.ordered(True)
    jobs, half = args.jobs, args.jobs // 2
    for n in range(jobs):
        await queue.enqueue(n, lane=f"t{n % 16}")
    rows: list[tuple[str, float]] = []
    await queue.wire.call("CONFIG", "RESETSTAT")
    for _ in range(half):
        job = await queue.claim()
        assert isinstance(job, Job)
        await queue.complete(job)
    rows.append(("claim + complete", await inner_calls(queue) / half))
    await queue.wire.call("CONFIG", "RESETSTAT")
    left = jobs - half
    while left:
        batch = await queue.claim_batch(50)
        assert isinstance(batch, list)
        await queue.complete_many(batch)
        left -= len(batch)
    rows.append(("claim_batch(50) + complete_many", await inner_calls(queue) / (jobs - half)))
    await queue.wire.call("CONFIG", "RESETSTAT")
    for n in range(jobs):
        await queue.enqueue(n, lane=f"new-{n}")
    rows.append(("enqueue into a new lane", await inner_calls(queue) / jobs))
    await discard(queue)
    kind = "ordered" if args.ordered else "unordered"
    print(f"\n{jobs} jobs, {kind} queue\n\n| workload | commands per job |\n|---|---:|")
    for label, per_job in rows:
        print(f"| {label} | {per_job:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--ordered", action="store_true", help="on an ordered queue")
    return serve(parser, run)


if __name__ == "__main__":
    sys.exit(main())

"""The cost of priority bands: the engine's µs per claim script (and the commands it ran inside)
with one band in use, against several.

Cases, 20 lanes each: ``one band`` (no job ever left the default band: the claim walks the one
ring, as before bands), ``one band, banded`` (the queue admitted one urgent job once: the claim
reads the bands and counts each lane's jobs of its band), ``three bands`` (priorities 8, 5 and 2
across the lanes: lanes move between rings as their heads change band).
Run: ``.venv/bin/python bench/priorities.py [--runs 5] [--url valkey://…]``; ``--baseline``
runs the first case alone (and passes no priority), so the same file measures a tree without
bands: ``PYTHONPATH=<that tree>/src .venv/bin/python bench/priorities.py --baseline``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from _harness import claim_blocks, serve
from echomq import Item, Job, Queue
from echomq.testing import discard

LANES = 20


async def loaded(url: str, case: str, jobs: int) -> Queue:
    queue = await Queue.connect(url, f"bench-bands-{time.time_ns()}", pool_size=1, events=False)
    if case == "one band, banded":
        await queue.enqueue("urgent", priority=9)
        assert isinstance(await queue.claim(600), Job)
    for start in range(0, jobs, 1000):
        items = []
        for n in range(start, start + 1000):
            extra: dict[str, Any] = {}
            if case == "three bands":
                extra["priority"] = (8, 5, 2)[(n // LANES) % 3]
            items.append(Item(n, lane=f"tenant{n % LANES}", **extra))
        await queue.enqueue_many(items)
    return queue


async def claim_costs(
    url: str, jobs: int, cases: list[str], block: int = 250
) -> dict[str, tuple[float, float]]:
    """µs and inner commands per claim, per case. The cases take turns in blocks of ``block``
    claims (a noisy host weighs on each alike); each block's share is the change of
    ``INFO commandstats`` across it."""
    queues = {case: await loaded(url, case, jobs) for case in cases}
    figures = await claim_blocks(queues, (jobs * 3 // 4) // block, block)
    for queue in queues.values():
        await discard(queue)
        await queue.close()
    return figures


async def run(url: str, runs: int, jobs: int, baseline: bool) -> None:
    cases = ["one band"] if baseline else ["one band", "one band, banded", "three bands"]
    usec: dict[str, list[float]] = {}
    calls: dict[str, float] = {}
    for _ in range(runs):
        for case, (per_claim, inner) in (await claim_costs(url, jobs, cases)).items():
            usec.setdefault(case, []).append(per_claim)
            calls[case] = inner
    print(f"\nthe claim per band layout: {LANES} lanes, {jobs} jobs, median of {runs} runs\n")
    print("| case | engine µs per claim | commands inside per claim |")
    print("|---|---:|---:|")
    for case, values in usec.items():
        print(f"| {case} | {statistics.median(values):.1f} | {calls[case]:.2f} |")
    if not baseline:
        one = statistics.median(usec["one band"])
        for case in cases[1:]:
            print(f"\n{case} / one band = {statistics.median(usec[case]) / one:.2f} (µs)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=8_000)
    parser.add_argument("--baseline", action="store_true", help="the one-band case alone")
    return serve(parser, lambda url, args: run(url, args.runs, args.jobs, args.baseline))


if __name__ == "__main__":
    sys.exit(main())

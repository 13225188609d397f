"""The cost of cost-weighted budgets: the engine's µs per claim script (and the commands it ran
inside), with and without a cost in use, with and without a budget to spend it on.

Cases, 20 lanes each, every lane with a rate of its own far above what the run spends (so the
claim checks and spends it on every claim, and never waits): ``no costs`` (every job costs 1:
the claim as before costs), ``no costs, no rate`` (the same, no rate: the cheapest claim),
``costs, no rate`` (jobs of cost 1 to 3, no budget: the claim never reads a cost), ``costs``
(jobs of cost 1 to 3 with the rates: the claim peeks each head's cost before it pops); and
fairness by work (``queue.fairness``) on the rate-free cases: ``by cost`` (a credit read and
written per lane visit; with costs, the heads' costs peeked), ``by time`` (the same, and each
lease records its charge).
Run: ``.venv/bin/python bench/costs.py [--runs 5] [--url valkey://…]``; ``--baseline`` runs the
two cost-free cases alone (and passes no cost), so the same file measures a tree without costs:
``PYTHONPATH=<that tree>/src .venv/bin/python bench/costs.py --baseline``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from _harness import claim_blocks, serve
from echomq import Item, JobOptions, Queue
from echomq.testing import discard

LANES = 20


async def loaded(url: str, case: str, jobs: int) -> Queue:
    queue = await Queue.connect(url, f"bench-costs-{time.time_ns()}", pool_size=1, events=False)
    for by in ("cost", "time"):
        if case.endswith(f"by {by}"):
            await queue.fairness(by)  # type: ignore[arg-type]
    if "no rate" not in case:
        for n in range(LANES):
            await queue.lane(f"tenant{n}").rate(1_000_000, 3600, mode="fixed")
    for start in range(0, jobs, 1000):
        items = []
        for n in range(start, start + 1000):
            extra: dict[str, Any] = {}
            if case.startswith("costs"):
                extra["cost"] = 1 + n % 3
            items.append((n, f"tenant{n % LANES}", extra))
        if case.startswith("costs"):
            for payload, lane, extra in items:
                await queue.admit(payload, JobOptions(lane=lane, **extra))
        else:
            await queue.enqueue_many([Item(payload, lane=lane) for payload, lane, _ in items])
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
    cases = ["no costs, no rate", "no costs"]
    if not baseline:
        cases += ["costs, no rate", "costs"]
        cases += ["no costs, no rate, by cost", "costs, no rate, by cost"]
        cases += ["no costs, no rate, by time"]
    usec: dict[str, list[float]] = {}
    calls: dict[str, float] = {}
    for _ in range(runs):
        for case, (per_claim, inner) in (await claim_costs(url, jobs, cases)).items():
            usec.setdefault(case, []).append(per_claim)
            calls[case] = inner
    print(
        f"\nthe claim with and without costs: {LANES} lanes, {jobs} jobs, median of {runs} runs\n"
    )
    print("| case | engine µs per claim | commands inside per claim |")
    print("|---|---:|---:|")
    for case, values in usec.items():
        print(f"| {case} | {statistics.median(values):.1f} | {calls[case]:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=4_000)
    parser.add_argument("--baseline", action="store_true", help="the cost-free cases alone")
    return serve(parser, lambda url, args: run(url, args.runs, args.jobs, args.baseline))


if __name__ == "__main__":
    sys.exit(main())

"""How good is a tenant's ETA: a steady flood over lanes with different weights, a rate and a
ceiling; sample jobs' predicted wait at enqueue (``queue.position``) against their real wait
from enqueue to claim. Prints, per lane and overall, the median absolute error (seconds) and the
median and 90th-percentile relative error.

Run: ``PYTHONPATH=src .venv/bin/python bench/eta.py [--seconds 20] [--workers 8] [--run-ms 10]
[--load 1.4] [--burst 3000] [--url valkey://…]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass, field

from _harness import serve
from echomq import Item, Job, Queue
from echomq.testing import discard

#: lane -> (weight, rate per second or None, ceiling or None, arrivals per second, backlog)
LANES: dict[str, tuple[int, int | None, int | None, float, int]] = {
    "w1": (1, None, None, 60.0, 200),
    "w1b": (1, None, None, 60.0, 100),
    "w2": (2, None, None, 120.0, 300),
    "w4": (4, None, None, 200.0, 400),
    "rate20": (1, 20, None, 22.0, 60),
    "ceiling1": (1, None, 1, 60.0, 100),
}


@dataclass
class Sample:
    lane: str
    predicted: float
    bound: str
    at: float


@dataclass
class Flood:
    samples: dict[str, Sample] = field(default_factory=dict)
    #: Every job's claim time: a sample may be claimed before its ETA is read.
    claimed: dict[str, float] = field(default_factory=dict)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    claims: int = 0


async def worker(queue: Queue, flood: Flood, run: float) -> None:
    """Claim, run ``run`` seconds, complete: one slot of the service."""
    while not flood.stop.is_set():
        job = await queue.claim()
        if not isinstance(job, Job):
            await asyncio.sleep(0.002)
            continue
        flood.claimed[job.id] = time.monotonic()
        flood.claims += 1
        await asyncio.sleep(run)
        await queue.complete(job)


async def feeder(queue: Queue, flood: Flood, load: float) -> None:
    """Each lane's arrivals, in 50 ms steps (fractions carried over); the lanes held by no rate
    or ceiling get ``load`` times theirs."""
    owed = dict.fromkeys(LANES, 0.0)
    while not flood.stop.is_set():
        items = []
        for lane, (_weight, rate, ceiling, arrivals, _backlog) in LANES.items():
            owed[lane] += arrivals * 0.05 * (1.0 if rate or ceiling else load)
            n, owed[lane] = int(owed[lane]), owed[lane] - int(owed[lane])
            items += [Item(lane, lane=lane)] * n
        await queue.enqueue_many(items)
        await asyncio.sleep(0.05)


async def sampler(
    queue: Queue, flood: Flood, seconds: float, every: float, lanes: list[str]
) -> None:
    """A sample job on each of ``lanes`` in turn every ``every`` seconds, its ETA read at
    once."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        lane = lanes[n % len(lanes)]
        n += 1
        verdict = await queue.enqueue("sample", lane=lane)
        at = time.monotonic()
        eta = await queue.position(verdict.id)
        if eta is not None and eta.seconds is not None:
            flood.samples[verdict.id] = Sample(lane, eta.seconds, eta.bound, at)
        await asyncio.sleep(every)


def report(samples: dict[str, Sample], claimed: dict[str, float]) -> None:
    rows: dict[str, list[tuple[Sample, float]]] = {}
    for id, s in samples.items():
        if id in claimed:
            rows.setdefault(s.lane, []).append((s, claimed[id] - s.at))
    rows["all"] = [pair for group in rows.values() for pair in group]
    print(
        f"{'lane':<10} {'n':>4} {'bound':<8} {'real s':>7} {'pred s':>7} "
        f"{'MAE s':>6} {'med rel':>8} {'p90 rel':>8}"
    )
    for lane, group in rows.items():
        real = [wait for _, wait in group]
        pred = [s.predicted for s, _ in group]
        errors = [abs(p - r) for p, r in zip(pred, real, strict=True)]
        relative = sorted(e / max(r, 0.05) for e, r in zip(errors, real, strict=True))
        bounds = {s.bound for s, _ in group}
        print(
            f"{lane:<10} {len(real):>4} {'/'.join(sorted(bounds)):<8} "
            f"{statistics.median(real):>7.2f} {statistics.median(pred):>7.2f} "
            f"{statistics.median(errors):>6.2f} {statistics.median(relative):>8.1%} "
            f"{relative[int(0.9 * (len(relative) - 1))]:>8.1%}"
        )


async def run(url: str, args: argparse.Namespace) -> None:
    queue = await Queue.connect(url, f"bench-eta-{time.time_ns()}", pool_size=4)
    try:
        for lane, (weight, rate, ceiling, _arrivals, backlog) in LANES.items():
            await queue.lane(lane).weight(weight)
            if rate:
                await queue.lane(lane).rate(rate, 1.0)
            if ceiling:
                await queue.lane(lane).limit(ceiling)
            await queue.enqueue_many([Item(lane, lane=lane) for _ in range(backlog)])
        sampled = list(LANES)
        if args.burst:
            # One tenant's burst with no arrivals after it: the model, which keeps a lane
            # served lately at its pace, errs long for the others until the burst is served.
            for start in range(0, args.burst, 1000):
                size = min(1000, args.burst - start)
                await queue.enqueue_many([Item("burst", lane="burst") for _ in range(size)])
            sampled.append("burst")
        flood = Flood()
        run_s = args.run_ms / 1000
        tasks = [asyncio.create_task(worker(queue, flood, run_s)) for _ in range(args.workers)]
        tasks.append(asyncio.create_task(feeder(queue, flood, args.load)))
        started = time.monotonic()
        await asyncio.sleep(args.warmup)  # the measured claim rate settles
        await sampler(queue, flood, args.seconds, args.every, sampled)
        # Let the samples be claimed; the flood goes on meanwhile, as it did while they waited.
        deadline = time.monotonic() + 60
        while any(id not in flood.claimed for id in flood.samples):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        elapsed = time.monotonic() - started
        flood.stop.set()
        await asyncio.gather(*tasks)
        print(
            f"load {args.load}: {args.workers} workers x {args.run_ms} ms jobs; "
            f"{flood.claims / elapsed:.0f} "
            f"claims/s over {elapsed:.0f} s; {len(flood.samples)} samples"
        )
        report(flood.samples, flood.claimed)
    finally:
        await discard(queue)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to sample")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--every", type=float, default=0.1, help="seconds between samples")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--run-ms", type=float, default=10.0)
    parser.add_argument(
        "--burst", type=int, default=0, help="jobs a lane 'burst' gets at the start, no more"
    )
    parser.add_argument(
        "--load",
        type=float,
        default=1.0,
        help="arrivals of the share lanes x this (1.0 keeps up with ~500 claims/s; 1.4 floods)",
    )
    return serve(parser, run)


if __name__ == "__main__":
    sys.exit(main())

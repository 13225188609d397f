"""The blocking producer of a sharded queue: ``ShardedSyncQueue.enqueue_many`` on a queue of
``--shards`` shards, its items spread over ``--lanes`` lanes (so over every shard), against
``SyncQueue.enqueue_many`` of the same items on a queue of one slot.

Run: ``.venv/bin/python bench/sharded_sync.py [--runs 5] [--batch 100] [--calls 200]
[--shards 3] [--lanes 60] [--url URL]``. One server (embedded unless ``--url``), so every shard
shares one connection: what its ``enqueue_many`` pays per shard beyond the first is the round
trip its pipeline saves or spends. Each run, each side (interleaved) on a fresh queue name;
``--calls`` calls of ``--batch`` items, timed wall clock; prints µs per job, the median of
``--runs`` (and every run's), and the median of each run's ratio sharded / one slot (which
carries less of a shared machine's noise); each queue is obliterated outside the timing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from _harness import serve
from echomq import Item, Queue, SyncQueue
from echomq.engine import ShardedQueue, ShardedSyncQueue
from echomq.testing import discard


def timed(sync: SyncQueue, batches: list[list[Item]]) -> float:
    """µs per job of ``enqueue_many`` over ``batches``, wall clock."""
    jobs = sum(len(batch) for batch in batches)
    start = time.perf_counter()
    for batch in batches:
        sync.enqueue_many(batch)
    return (time.perf_counter() - start) / jobs * 1e6


async def one_run(url: str, args: argparse.Namespace) -> dict[str, float]:
    lanes = [f"t{i}" for i in range(args.lanes)]
    batches = [
        [Item(i, lane=lanes[(c * args.batch + i) % len(lanes)]) for i in range(args.batch)]
        for c in range(args.calls)
    ]
    figures: dict[str, float] = {}
    name = f"bench-ss-{uuid.uuid4().hex[:8]}"
    sharded = await ShardedQueue.connect(url, name, shards=args.shards)  # makes the shards
    with ShardedSyncQueue.connect(url, name, shards=args.shards) as sync:
        sync.enqueue_many(batches[0])  # warm: the sockets and the id node, out of the timing
        figures[f"sharded S={args.shards}"] = await asyncio.to_thread(timed, sync, batches)
    await discard(sharded)
    plain_name = f"bench-sp-{uuid.uuid4().hex[:8]}"
    with SyncQueue.connect(url, plain_name) as plain:
        plain.enqueue_many(batches[0])
        figures["one slot"] = await asyncio.to_thread(timed, plain, batches)
    queue = await Queue.connect(url, plain_name)
    await discard(queue)
    return figures


async def run(url: str, args: argparse.Namespace) -> None:
    runs: dict[str, list[float]] = {}
    for _ in range(args.runs):
        for side, figure in (await one_run(url, args)).items():
            runs.setdefault(side, []).append(figure)
    print(f"enqueue_many of {args.batch} items x {args.calls} calls, {args.lanes} lanes")
    for side, figures in runs.items():
        every = " ".join(f"{f:.2f}" for f in figures)
        print(f"{side:>14}: {statistics.median(figures):6.2f} µs/job (median; runs {every})")
    sharded, plain = runs.values()
    ratios = [a / b for a, b in zip(sharded, plain, strict=True)]  # the same run's, so its noise
    print(f"sharded / one slot: {statistics.median(ratios):.2f} (median of the runs' ratios)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=100, help="items per enqueue_many")
    parser.add_argument("--calls", type=int, default=200, help="enqueue_many calls per run")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--lanes", type=int, default=60)
    serve(parser, run)


if __name__ == "__main__":
    main()

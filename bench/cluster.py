"""Cluster scaling: total drain throughput of 8 queues whose slots live on 1, 2 or 3 shards.

Run: ``.venv/bin/python bench/cluster.py [--runs 3] [--jobs 2000] [--procs 2] [--replicas 1]``.
Starts an embedded cluster of 3 primaries (+ ``--replicas`` each). For each case the 8 queues
are named so their slots land on the first 1, 2 or 3 primaries, ``--jobs`` no-op jobs each are
enqueued (not timed), then ``--procs`` client processes drain them (each owns 8/procs queues,
two ``claim_batch(50)`` + ``complete_many`` loops per queue), timed from a start signal to the
last completion. Prints the median jobs/s of ``--runs`` runs and the scaling over one shard.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from concurrent.futures import ProcessPoolExecutor

from echomq import Item, Queue
from echomq.engine.keys import Keyspace, slot
from echomq.server import ClusterOptions, EmbeddedCluster
from echomq.wire.cluster import ClusterRouter
from echomq.wire.url import seeds_from_url

QUEUES = 8
BATCH = 50
LOOPS_PER_QUEUE = 2


def names_on(router: ClusterRouter, shards: list[str]) -> list[str]:
    """Eight fresh queue names, spread round-robin over the primaries in ``shards``."""
    names: list[str] = []
    while len(names) < QUEUES:
        name = f"bench-{uuid.uuid4().hex[:10]}"
        if router.owner(slot(Keyspace(name).root)).address == shards[len(names) % len(shards)]:
            names.append(name)
    return names


async def _drain(url: str, names: list[str], start_at: float) -> int:
    router = await ClusterRouter(seeds_from_url(url)).connect()
    queues = [Queue(name, router, events=False) for name in names]
    done = 0

    async def loop(queue: Queue) -> None:
        nonlocal done
        while isinstance(jobs := await queue.claim_batch(BATCH), list):
            await queue.complete_many(jobs)
            done += len(jobs)

    await asyncio.sleep(max(0.0, start_at - time.time()))  # every process starts together
    await asyncio.gather(*(loop(q) for q in queues for _ in range(LOOPS_PER_QUEUE)))
    await router.close()
    return done


def drain(url: str, names: list[str], start_at: float) -> tuple[int, float]:
    done = asyncio.run(_drain(url, names, start_at))
    return done, time.time()


async def fill(router: ClusterRouter, names: list[str], jobs: int) -> None:
    async def one(name: str) -> None:
        queue = Queue(name, router, events=False)
        for start in range(0, jobs, 1000):
            await queue.enqueue_many(Item(i) for i in range(start, min(jobs, start + 1000)))

    await asyncio.gather(*(one(n) for n in names))


async def clean(router: ClusterRouter, names: list[str]) -> None:
    for name in names:
        queue = Queue(name, router, events=False)
        await queue.pause()
        await queue.obliterate(force=True)


def run_case(
    url: str, pool: ProcessPoolExecutor, shards: list[str], args: argparse.Namespace
) -> float:
    async def prepare() -> list[str]:
        async with ClusterRouter(seeds_from_url(url)) as router:
            names = names_on(router, shards)
            await fill(router, names, args.jobs)
            return names

    names = asyncio.run(prepare())
    share = [names[i :: args.procs] for i in range(args.procs)]
    start_at = time.time() + 0.5  # time for every process to connect first
    results = list(pool.map(drain, [url] * args.procs, share, [start_at] * args.procs))
    total = sum(done for done, _ in results)
    elapsed = max(end for _, end in results) - start_at
    assert total == QUEUES * args.jobs, (total, QUEUES * args.jobs)

    async def tidy() -> None:
        async with ClusterRouter(seeds_from_url(url)) as router:
            await clean(router, names)

    asyncio.run(tidy())
    return total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per queue")
    parser.add_argument("--procs", type=int, default=2, help="client processes draining")
    parser.add_argument("--replicas", type=int, default=1, help="replicas per primary")
    args = parser.parse_args()
    with EmbeddedCluster(ClusterOptions(replicas=args.replicas)) as cluster:
        url = cluster.url
        primaries = [f"{n.host}:{n.port}" for n in cluster.primaries]
        print(f"cluster {url}: 3 primaries, {args.replicas} replica(s) each")
        rates: dict[int, list[float]] = {1: [], 2: [], 3: []}
        with ProcessPoolExecutor(args.procs) as pool:
            for run in range(args.runs):
                for shards in (1, 2, 3):  # interleaved: noise hits every case alike
                    rate = run_case(url, pool, primaries[:shards], args)
                    rates[shards].append(rate)
                    print(f"  run {run + 1}: {shards} shard(s) {rate:,.0f} jobs/s", flush=True)
    base = statistics.median(rates[1])
    print(f"\n| shards | jobs/s (median of {args.runs}) | vs 1 shard | per shard |")
    print("|---:|---:|---:|---:|")
    for shards, found in rates.items():
        median = statistics.median(found)
        print(f"| {shards} | {median:,.0f} | {median / base:.2f}x | {median / base / shards:.2f} |")


if __name__ == "__main__":
    main()

"""What one durable call waits when a replica's fsync is asked: ms per call of ``enqueue`` and
``enqueue_many`` with ``Durability(replicas=1)``, async and blocking, plain and sharded, against
the same calls without a durability.

Run: ``.venv/bin/python bench/durable_enqueue.py [--runs 5] [--calls 10] [--against OTHER/src]``.

An embedded primary and one replica, both ``appendonly yes`` with ``appendfsync always``;
``--cluster``: an embedded cluster of 3 primaries and a replica each, all so; ``--url``: a
primary of your own with a replica running AOF. Cases: one ``enqueue``; an
``enqueue_many`` of ``--batch`` items on one queue; the same over a ``ShardedQueue`` of
``--shards`` shards (its items on lanes spread over every shard: one ``enqueue_together``);
each from ``Queue``/``ShardedQueue`` and from the blocking ``SyncQueue``/``ShardedSyncQueue``.
Each run times ``--calls`` calls of each case on fresh queues and keeps their median; a cell
is the median of ``--runs`` runs. ``--against`` runs the same cases with another checkout's
``src`` (a child process on the same servers, its runs interleaved with this tree's).
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
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from functools import partial
from typing import Any

from echomq import Item, Queue, SyncQueue
from echomq.engine import Durability, ShardedQueue, ShardedSyncQueue
from echomq.errors import ServerError
from echomq.server import EmbeddedCluster, EmbeddedValkey
from echomq.server.cluster import admin
from echomq.server.embedded import ServerOptions
from echomq.testing import discard, lanes_on
from echomq.wire import Connector
from echomq.wire.url import ConnectionOptions

DURABLE = Durability(replicas=1, timeout=2.0)
MODES: dict[str, Durability | None] = {"default": None, "replicas=1": DURABLE}
CASES = ("enqueue", "enqueue_many", "sharded enqueue_many")
SIDES = ("async", "blocking")


async def timed(calls: int, send: Callable[[], Awaitable[Any]]) -> float:
    """The median ms of ``calls`` calls of ``send``, after one untimed (scripts loaded)."""
    await send()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await send()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def one_run(url: str, args: argparse.Namespace) -> dict[str, float]:
    """Each ``case / side / mode``'s median ms per call, on fresh queues."""
    figures: dict[str, float] = {}
    for mode, durability in MODES.items():
        name = f"bench-durable-{uuid.uuid4().hex[:8]}"
        queue = await Queue.connect(url, name, events=False, durability=durability)
        sync = await asyncio.to_thread(SyncQueue.connect, url, name, durability=durability)
        sharded = await ShardedQueue.connect(
            url, f"{name}-sharded", shards=args.shards, durability=durability
        )
        sharded_sync = await asyncio.to_thread(
            ShardedSyncQueue.connect, url, sharded.name, shards=args.shards, durability=durability
        )
        try:
            lanes = [lane for part in lanes_on(sharded.placement_map, [1] * args.shards)
                     for lane in part]  # fmt: skip
            items = list(range(args.batch))
            spread = [Item(i, lane=lanes[i % len(lanes)]) for i in items]
            sends: dict[tuple[str, str], Callable[[], Awaitable[Any]]] = {
                ("enqueue", "async"): partial(queue.enqueue, 0),
                ("enqueue", "blocking"): partial(asyncio.to_thread, sync.enqueue, 0),
                ("enqueue_many", "async"): partial(queue.enqueue_many, items),
                ("enqueue_many", "blocking"): partial(asyncio.to_thread, sync.enqueue_many, items),
                ("sharded enqueue_many", "async"): partial(sharded.enqueue_many, spread),
                ("sharded enqueue_many", "blocking"): partial(
                    asyncio.to_thread, sharded_sync.enqueue_many, spread
                ),
            }
            for (case, side), send in sends.items():
                figures[f"{case} / {side} / {mode}"] = await timed(args.calls, send)
        finally:
            sync.close()
            sharded_sync.close()
            await discard(queue)
            await discard(sharded)
    return figures


def other_run(src: str, url: str, args: argparse.Namespace) -> dict[str, float]:
    """One run of this script with ``src`` first on the path, on the same server."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, __file__, "--url", url, "--runs", "1", "--json"]
    command += ["--calls", str(args.calls), "--batch", str(args.batch)]
    command += ["--shards", str(args.shards)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


async def ready(url: str) -> None:
    """Wait until a replica of the server at ``url`` confirms the fsync of a write (its AOF on
    and its first rewrite over). A wait after no write of its connection is answered at once:
    a write first (on a cluster node, of a key of its slots: the first that is not MOVED)."""
    options = ConnectionOptions.from_url(url)
    async with Connector(options, version_fence=None) as probe:
        deadline = time.monotonic() + 30
        key = 0
        while time.monotonic() < deadline:
            try:
                await probe.call("SET", f"bench-durable-probe-{key}", 1, "PX", 1000)
            except ServerError:
                key += 1
                continue
            if (await probe.call("WAITAOF", 0, 1, 100))[1] >= 1:
                return
    raise SystemExit(f"{url}: no replica confirmed an fsync within 30 s")


def measure(url: str, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Each side's (this tree, ``--against``) median over ``--runs`` of every figure."""
    runs: dict[str, list[dict[str, float]]] = {"this tree": []}
    if args.against:
        runs[f"@{args.against}"] = []
    for _ in range(args.runs):
        runs["this tree"].append(asyncio.run(one_run(url, args)))
        if args.against:
            runs[f"@{args.against}"].append(other_run(args.against, url, args))
    return {
        side: {key: statistics.median(run[key] for run in done) for key in done[0]}
        for side, done in runs.items()
    }


def report(results: dict[str, dict[str, float]]) -> None:
    columns = [(side, mode) for side in results for mode in MODES]
    print("\n| case | " + " | ".join(f"{side} {mode}" for side, mode in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for case in CASES:
        for kind in SIDES:
            cells = [f"{results[side][f'{case} / {kind} / {mode}']:.2f}" for side, mode in columns]
            print(f"| {case}, {kind} (ms) | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a primary of your own, with a replica running AOF")
    parser.add_argument("--cluster", action="store_true", help="an embedded 3x2 cluster instead")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--batch", type=int, default=60)
    parser.add_argument("--shards", type=int, default=6)
    parser.add_argument("--against", help="another checkout's src: the same cases with it")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:  # a child of --against: one run's figures, one line
        print(json.dumps(asyncio.run(one_run(args.url, args))))
        return
    with ExitStack() as stack:
        url, primaries = args.url, [args.url]
        if args.cluster:
            cluster = stack.enter_context(EmbeddedCluster())
            for node in cluster.nodes:  # AOF everywhere: a replica's fsync is what is counted
                admin(node.host, node.port, "CONFIG", "SET", "appendfsync", "always")
                admin(node.host, node.port, "CONFIG", "SET", "appendonly", "yes")
            print(f"embedded cluster: {len(cluster.primaries)} primaries, a replica each")
            url, primaries = cluster.url, [node.url for node in cluster.primaries]
        elif url is None:
            fsync = (("appendfsync", "always"),)
            at_once = (("repl-diskless-sync-delay", "0"),)
            primary = stack.enter_context(
                EmbeddedValkey(ServerOptions(appendonly=True, extra=fsync + at_once))
            )
            replica_of = (("replicaof", f"{primary.host} {primary.port}"),)
            stack.enter_context(
                EmbeddedValkey(ServerOptions(appendonly=True, extra=fsync + replica_of))
            )
            print(f"embedded valkey {primary.version}: a primary and a replica, appendfsync always")
            url = primaries[0] = primary.url
        for each in primaries:
            asyncio.run(ready(each))
        report(measure(url, args))


if __name__ == "__main__":
    main()

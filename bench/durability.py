"""What "acknowledged means on disk" costs: enqueue throughput per durability mode and fsync policy.

Run: ``.venv/bin/python bench/durability.py [--runs 5] [--seconds 1.0]``.

Two embedded servers with ``appendonly yes``, one ``appendfsync everysec`` (the usual setting)
and one ``appendfsync always``; on each, the default mode (no wait) and ``Durability()`` (one
``WAITAOF 1 0`` per call or per batch), for a single sequential enqueue, 50 tasks enqueueing at
once, ``enqueue_many`` batches of 100 and 1000, and four tasks each sending batches of 1000.
Each cell is the median of ``--runs`` timed windows of ``--seconds`` (runs of the modes
interleaved), with its ratio to the default mode on the ``everysec`` server.
``--policies everysec,everysec+hz100,always`` adds a server whose ``hz`` is 100 (a wait under
``everysec`` lasts about one ``hz`` tick).

``--url`` runs one server of your own instead (it must have AOF on); ``--replicas N`` adds
``Durability(replicas=N)`` (a server with N replicas running AOF).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

from echomq import Queue
from echomq.engine import Durability
from echomq.server import EmbeddedValkey
from echomq.server.embedded import ServerOptions
from echomq.testing import discard

Case = Callable[[Queue], Awaitable[int]]


def single(queue: Queue) -> Awaitable[int]:
    async def run() -> int:
        await queue.enqueue(0)
        return 1

    return run()


def concurrent(queue: Queue) -> Awaitable[int]:
    async def run() -> int:
        await asyncio.gather(*(queue.enqueue(i) for i in range(50)))
        return 50

    return run()


def bulk(size: int) -> Case:
    items = list(range(size))

    async def run(queue: Queue) -> int:
        await queue.enqueue_many(items)
        return size

    return run


def bulk_tasks(size: int, tasks: int) -> Case:
    items = list(range(size))

    async def run(queue: Queue) -> int:
        await asyncio.gather(*(queue.enqueue_many(items) for _ in range(tasks)))
        return size * tasks

    return run


CASES: dict[str, Case] = {
    "enqueue, 1 task": single,
    "enqueue, 50 tasks": concurrent,
    "enqueue_many(100)": bulk(100),
    "enqueue_many(1000)": bulk(1000),
    "enqueue_many(1000), 4 tasks": bulk_tasks(1000, 4),
}


async def window(queue: Queue, case: Case, seconds: float) -> float:
    """Jobs/s over one timed window (whole calls; at least one)."""
    done = 0
    started = time.perf_counter()
    while True:
        done += await case(queue)
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return done / elapsed


async def measure(url: str, args: argparse.Namespace) -> dict[tuple[str, str], float]:
    modes: dict[str, Durability | None] = {"default": None, "fsync": Durability(timeout=2.0)}
    if args.replicas:
        modes[f"replicas={args.replicas}"] = Durability(replicas=args.replicas, timeout=2.0)
    queues = {
        mode: await Queue.connect(url, f"bench-durable-{uuid.uuid4().hex[:8]}", events=False,
                                  durability=durability)
        for mode, durability in modes.items()
    }  # fmt: skip
    medians: dict[tuple[str, str], float] = {}
    try:
        for name, case in CASES.items():
            samples: dict[str, list[float]] = {mode: [] for mode in modes}
            for queue in queues.values():
                await window(queue, case, 0.2)  # warm: scripts loaded, minter leased
            for _ in range(args.runs):
                for mode, queue in queues.items():
                    samples[mode].append(await window(queue, case, args.seconds))
                    await queue.drain(schedule=True)
            for mode in modes:
                medians[name, mode] = statistics.median(samples[mode])
    finally:
        for queue in queues.values():
            await discard(queue)
    return medians


def report(results: dict[str, dict[tuple[str, str], float]]) -> None:
    """One table: every server and mode per case, each as jobs/s and its ratio to the default
    mode on the first server (``everysec``, the usual setting)."""
    columns = [(policy, mode) for policy, medians in results.items() for _, mode in medians]
    columns = list(dict.fromkeys(columns))
    first = columns[0]
    heads = [f"{policy} {mode}" for policy, mode in columns]
    print("\n| case | " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * len(columns))
    for name in CASES:
        base = results[first[0]][name, first[1]]
        cells = []
        for policy, mode in columns:
            value = results[policy][name, mode]
            cells.append(f"{value:,.0f} ({value / base:.2f})")
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a server of your own (with appendonly yes)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--replicas", type=int, default=0)
    parser.add_argument(
        "--policies",
        default="everysec,always",
        help="embedded servers' appendfsync, comma-separated; +hzN sets hz (everysec+hz100)",
    )
    args = parser.parse_args()
    results: dict[str, dict[tuple[str, str], float]] = {}
    if args.url:
        results["yours"] = asyncio.run(measure(args.url, args))
    else:
        for policy in args.policies.split(","):
            fsync, _, hz = policy.partition("+hz")
            extra = (("appendfsync", fsync),) + ((("hz", hz),) if hz else ())
            with EmbeddedValkey(ServerOptions(appendonly=True, extra=extra)) as server:
                print(f"embedded valkey {server.version}, appendfsync {fsync}, hz {hz or 10}")
                results[policy] = asyncio.run(measure(server.url, args))
    report(results)


if __name__ == "__main__":
    main()

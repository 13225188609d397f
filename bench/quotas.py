"""Queue-wide gates on a sharded queue: how much of the budget the per-shard quotas let the
workers use while the demand moves from one shard to another (docs/concepts/shards.md,
"Queue-wide gates across shards": the overshoot is 0 by construction, the undershoot is the
price).

Run: ``.venv/bin/python bench/quotas.py [--shards 3] [--budget 20] [--window 0.5]
[--ceiling 4] [--seconds 4] [--workers 6] [--hold 0.02]``.
A fresh ``ShardedQueue`` per gate on one server. Its lanes' jobs are all on shard 0 for the first
half of the run; then shard 0's are drained and jobs arrive on shard S - 1 alone (the move's
server time read once they are admitted).
``--workers`` claim loops (one job a claim, held ``--hold`` s) drive it, with the rebalancer
their upkeep starts. For the smooth rate (``--budget`` per ``--window`` s) it prints the worst
window (never over the budget), the budget used before and after the move, and how long after
the move shard S - 1's first claim came; for the ceiling (``--ceiling``), the most jobs leased
at one instant over every shard (sampled every 2 ms, one script) and the mean.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid

from _harness import serve
from echomq import Item
from echomq.engine import Empty, ShardedQueue
from echomq.testing import discard, lanes_on, most_in_window

LEASE_MS = 30_000


async def drive(
    queue: ShardedQueue, args: argparse.Namespace
) -> tuple[list[tuple[int, int]], list[int], float]:
    """The claims ((server ms, shard)), the leased samples and the move's server ms."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    until, move = start + args.seconds, start + args.seconds / 2
    last_shard = len(queue.shards) - 1
    first = lanes_on(queue.placement_map, [6], "b")[0]
    last = lanes_on(queue.placement_map, [0] * last_shard + [1], "b")[last_shard]
    await queue.enqueue_many([Item({"n": i}, lane=first[i % 6]) for i in range(2000)])
    claims: list[tuple[int, int]] = []
    leased: list[int] = []
    moved: list[int] = []
    actives = [shard.keys.active for shard in queue.shards]
    sample = "local n = 0 for _, k in ipairs(KEYS) do n = n + redis.call('ZCARD', k) end return n"

    async def worker() -> None:
        while loop.time() < until:
            got = await queue.claim_some(1, LEASE_MS / 1000)
            if not isinstance(got, tuple):
                hint = got.retry_in if isinstance(got, Empty) else got.wait
                await asyncio.sleep(min(hint or 0.005, 0.02))
                continue
            for job in got[0]:
                claims.append((job.deadline_ms - LEASE_MS, job.shard))
                await asyncio.sleep(args.hold)
                await queue.complete(job)

    async def mover() -> None:
        await asyncio.sleep(move - loop.time())
        await queue.drain()  # shard 0's backlog gone: the demand is on the last shard now
        await queue.enqueue_many([Item({"n": i}, lane=last[0]) for i in range(2000)])
        seconds, micros = await queue.wire.call("TIME")
        moved.append(int(seconds) * 1000 + int(micros) // 1000)

    async def sampler() -> None:
        while loop.time() < until:
            leased.append(int(await queue.wire.call("EVAL", sample, len(actives), *actives)))
            await asyncio.sleep(0.002)

    await queue.upkeep()  # starts the rebalancer, as a worker's upkeep does
    await asyncio.gather(mover(), sampler(), *(worker() for _ in range(args.workers)))
    return claims, leased, moved[0]


def most(budget: int, span_ms: int, window_ms: int) -> int:
    return budget * (span_ms // window_ms + 1)


async def run(url: str, args: argparse.Namespace) -> None:
    window_ms = round(args.window * 1000)
    for gate in ("rate", "ceiling"):
        queue = await ShardedQueue.connect(url, f"bq-{uuid.uuid4().hex[:8]}", shards=args.shards)
        try:
            if gate == "rate":
                await queue.rate_limit(args.budget, args.window, mode="smooth")
            else:
                await queue.concurrency(args.ceiling)
            claims, leased, moved = await drive(queue, args)
        finally:
            await discard(queue)
        times = [t for t, _ in claims]
        t0, end = min(times), max(times)
        if gate == "rate":
            # The claims as a share of the most a smooth rate admits in a span of d ms:
            # M x (floor(d / T) + 1) (each window may hold M, the first at the span's start).
            before = sum(1 for t in times if t < moved) / most(args.budget, moved - t0, window_ms)
            after = sum(1 for t in times if t >= moved) / most(args.budget, end - moved, window_ms)
            landed = min((t for t, k in claims if k == args.shards - 1), default=None)
            late = "none" if landed is None else f"{landed - moved} ms"
            print(
                f"smooth rate {args.budget}/{window_ms} ms over {args.shards} shards: "
                f"{len(claims)} claims, worst window {most_in_window(times, window_ms)}, budget "
                f"used {before:.0%} before the move, {after:.0%} after; the new shard's first "
                f"claim {late} after the move"
            )
        else:
            mean = sum(leased) / len(leased)
            print(
                f"ceiling {args.ceiling} over {args.shards} shards, jobs held "
                f"{args.hold * 1000:.0f} ms: {len(claims)} claims, most leased at once "
                f"{max(leased)}, mean {mean:.2f} ({mean / args.ceiling:.0%} of the budget)"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--budget", type=int, default=20)
    parser.add_argument("--window", type=float, default=0.5)
    parser.add_argument("--ceiling", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--hold", type=float, default=0.02)
    return serve(parser, run)


if __name__ == "__main__":
    raise SystemExit(main())

"""Producers in many processes on one queue: how many jobs each id scheme loses.

Run: ``.venv/bin/python bench/producers.py [--processes 8] [--ids 20000] [--batch 100]``.
Every process enqueues ``--ids`` jobs in ``enqueue_many`` batches, all starting together;
prints, for the leased minter (the default) and for every process minting as explicit node 0
(what every process did before node leases), the verdicts and how many jobs the queue holds.
A duplicate verdict here is a lost job: every item was new.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid

from _harness import serve
from echomq import Queue

PRODUCER = """
import asyncio, json, sys
from echomq import Item, Queue
from echomq.engine import Minter

async def main(url, name, count, batch, scheme):
    minter = Minter(0) if scheme == "node0" else None
    queue = await Queue.connect(url, name, events=False, minter=minter)
    await queue.minter.ready()
    await queue.wire.call("RPUSH", "ready:" + name, 1)
    await queue.wire.call("BLPOP", "go:" + name, 60)
    kinds = {}
    for start in range(0, count, batch):
        for v in await queue.enqueue_many([Item(n) for n in range(start, start + batch)]):
            kinds[v.kind] = kinds.get(v.kind, 0) + 1
    print(json.dumps(kinds))
    await queue.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))
"""


async def trial(url: str, args: argparse.Namespace, scheme: str) -> None:
    name = f"bench-producers-{uuid.uuid4().hex[:8]}"
    argv = [sys.executable, "-c", PRODUCER, url, name, str(args.ids), str(args.batch), scheme]
    procs = [
        await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
        for _ in range(args.processes)
    ]
    queue = await Queue.connect(url, name, events=False)
    for _ in procs:
        await queue.wire.call("BLPOP", "ready:" + name, 60)
    started = time.perf_counter()
    await queue.wire.call("RPUSH", "go:" + name, *[1] * args.processes)
    outputs = await asyncio.gather(*(p.communicate() for p in procs))
    elapsed = time.perf_counter() - started
    kinds: dict[str, int] = {}
    for out, _ in outputs:
        for kind, n in json.loads(out).items():
            kinds[kind] = kinds.get(kind, 0) + n
    held = (await queue.counts()).pending
    total = args.processes * args.ids
    print(
        f"{scheme:>7}: {args.processes} x {args.ids} ids -> verdicts {kinds}, queue holds "
        f"{held}, lost {total - held} ({100 * (total - held) / total:.2f}%), "
        f"{total / elapsed:,.0f} jobs/s"
    )
    await queue.pause()
    await queue.obliterate(force=True)
    await queue.close()


async def main(url: str, args: argparse.Namespace) -> None:
    for scheme in ("leased", "node0"):
        await trial(url, args, scheme)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--ids", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    sys.exit(serve(parser, main))

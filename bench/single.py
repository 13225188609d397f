"""Where one sequential call's time goes: a producer awaiting each ``enqueue`` in turn.

Run: ``.venv/bin/python bench/single.py [--runs 5] [--calls 10000]``. Per call, medians of
``--runs``: the wall time; the client's CPU (this process: Python, hiredis and the socket
syscalls); the server's own time in the script (``INFO commandstats``); and the same for a bare
``PING`` on the same connector, the floor of any round trip on this host. What the wall time
holds beyond client CPU + server time is neither process running: the loopback hand-offs and
wake-ups between the two processes (and, on a shared host, waiting for a core).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from _harness import engine_usec_per_script, serve
from echomq import Queue
from echomq.testing import discard


async def _measure(queue: Queue, calls: int, ping: bool) -> tuple[float, float, float]:
    await queue.wire.call("CONFIG", "RESETSTAT")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if ping:
        for _ in range(calls):
            await queue.wire.call("PING")
    else:
        for n in range(calls):
            await queue.enqueue(n, lane=f"t{n % 16}")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    server = await engine_usec_per_script(queue, "ping" if ping else "evalsha")
    return wall / calls * 1e6, cpu / calls * 1e6, server


async def run(url: str, args: argparse.Namespace) -> None:
    queue = await Queue.connect(url, f"single-{time.time_ns()}")
    for n in range(500):  # warm: the script loaded, the minter's node leased
        await queue.enqueue(n, lane=f"t{n % 16}")
    rows: dict[str, list[tuple[float, float, float]]] = {"enqueue": [], "PING": []}
    for _ in range(args.runs):
        rows["enqueue"].append(await _measure(queue, args.calls, ping=False))
        rows["PING"].append(await _measure(queue, args.calls, ping=True))
    await discard(queue)
    await queue.close()
    print(f"\n{args.calls} sequential calls, median of {args.runs} runs\n")
    print("| call | calls/s | wall µs | client CPU µs | server µs | neither (hand-offs) µs |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, samples in rows.items():
        wall, cpu, server = (statistics.median(col) for col in zip(*samples, strict=True))
        rest = max(0.0, wall - cpu - server)
        print(
            f"| {name} | {1e6 / wall:,.0f} | {wall:.1f} | {cpu:.1f} | {server:.1f} | {rest:.1f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10_000)
    return serve(parser, run)


if __name__ == "__main__":
    sys.exit(main())

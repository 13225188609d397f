"""Drain under a kill storm: N jobs drained by ``echomq worker --processes P`` while a random
worker process is SIGKILLed every 1-2 s (OOM kills, spot reclaims), against P plain
``echomq worker`` processes that this script restarts at once (a process manager with no
backoff). Prints the drain time, the kills, and the seconds with no worker process alive.

The supervisor is whichever echomq is on the import path, so the same command measures two
checkouts: ``PYTHONPATH=old/src .venv/bin/python bench/kill_storm.py`` against ``src``.
Killed jobs come back when their lease expires (``--lease 2``, ``--beat 0.5`` here); a job
killed more than ``--max-stalled 10`` times is dead, and counts as drained.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from _harness import serve
from echomq import Item, Queue
from echomq.testing import discard

BENCH = Path(__file__).resolve().parent
FLAGS = ["--concurrency", "10", "--lease", "2", "--beat", "0.5", "--max-stalled", "10"]


def _command(url: str, name: str) -> list[str]:
    return [
        sys.executable, "-m", "echomq", "--url", url, "worker", "_handlers:sleepy",
        "--queue", name, "--log-level", "WARNING", *FLAGS,
    ]  # fmt: skip


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, env=env)


def _environment(handler_ms: float) -> dict[str, str]:
    paths = [str(BENCH), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "BENCH_HANDLER_MS": str(handler_ms),
    }


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError):
            found += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
    return [child for child in found if _is_alive(child)]


def _is_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def storm(url: str, args: argparse.Namespace, mode: str) -> tuple[float, int, int, float]:
    """(seconds, jobs drained, kills, seconds with no worker process alive): until drained, or
    ``--deadline`` seconds."""
    name = f"storm-{uuid.uuid4().hex[:8]}"
    queue = await Queue.connect(url, name)
    for first in range(0, args.jobs, 1000):
        await queue.enqueue_many([Item(n) for n in range(first, min(args.jobs, first + 1000))])
    env = _environment(args.handler_ms)
    command = _command(url, name)
    shuffle = random.Random(args.seed)
    if mode == "supervisor":
        supervisor = _start([*command, "--processes", str(args.processes)], env)
        plain: list[subprocess.Popen[bytes]] = []
    else:
        plain = [_start(command, env) for _ in range(args.processes)]
    loop = asyncio.get_running_loop()
    start = loop.time()
    next_kill = start + shuffle.uniform(1, 2)
    kills, empty, last, is_up = 0, 0.0, start, False  # counted once the first one ran
    try:
        while True:
            counts = await queue.counts()
            done = counts.completed + counts.dead
            now = loop.time()
            if done >= args.jobs or now - start >= args.deadline:
                break
            if mode == "supervisor":
                alive = _children(supervisor.pid)
            else:
                for n, process in enumerate(plain):  # restarted at once, as systemd would
                    if process.poll() is not None:
                        plain[n] = _start(command, env)
                alive = [p.pid for p in plain if _is_alive(p.pid)]
            if not alive and is_up:
                empty += now - last
            is_up, last = is_up or bool(alive), now
            if now >= next_kill and alive:
                os.kill(shuffle.choice(alive), signal.SIGKILL)
                kills += 1
                next_kill = now + shuffle.uniform(1, 2)
            await asyncio.sleep(0.05)
    finally:
        for process in [supervisor] if mode == "supervisor" else plain:
            process.send_signal(signal.SIGTERM)
        for process in [supervisor] if mode == "supervisor" else plain:
            while process.poll() is None:
                await asyncio.sleep(0.05)
        await discard(queue)
    return loop.time() - start, done, kills, empty


async def run(url: str, args: argparse.Namespace) -> None:
    ideal = args.jobs * args.handler_ms / 1000 / (10 * args.processes)
    print(f"{args.jobs:,} jobs of {args.handler_ms} ms, {args.processes} processes of 10 "
          f"(no kills: ~{ideal:.1f} s of handler time)")  # fmt: skip
    print("| mode | drain s | kills | no worker alive, s |")
    print("|---|---:|---:|---:|")
    for mode in args.modes:
        seconds, done, kills, empty = await storm(url, args, mode)
        drained = f"{seconds:.1f}" if done >= args.jobs else f"> {seconds:.0f} ({done:,} done)"
        print(f"| {mode} | {drained} | {kills} | {empty:.1f} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--handler-ms", type=float, default=20.0)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--deadline", type=float, default=300.0, help="give up after (s)")
    parser.add_argument(
        "--modes", nargs="+", default=["supervisor", "plain"], choices=["supervisor", "plain"]
    )
    return serve(parser, run)


if __name__ == "__main__":
    sys.exit(main())

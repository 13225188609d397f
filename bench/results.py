"""What keeping results costs the engine: the server's own µs per ``complete`` script, per call
and per job, with ``result_ttl`` 0 (rows deleted, as before results existed) and 86,400 (rows
kept a day, with a result), one job per call and 100 per call, and with a waiter subscribed to
the ``done`` channel (the scripts then publish each id).

Run: ``.venv/bin/python bench/results.py [--runs 5] [--jobs 5000]``. With ``--old SRC`` (a
``git worktree`` of an earlier commit's ``src``) the ttl-0 cases also run on that checkout,
alternated with this one on the same server, so the two can be compared like for like.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import engine_usec_per_script
from echomq import Job, Queue
from echomq.engine.scripts import Script, _helpers, _link
from echomq.server import EmbeddedValkey
from echomq.testing import discard
from echomq.wire import Connector

LUA = Path(__file__).resolve().parents[1] / "src" / "echomq" / "engine" / "lua"

#: (label, result_ttl seconds, jobs per complete call, a waiter subscribed)
CASES = [
    ("complete, 1 per call, ttl 0", 0.0, 1, False),
    ("complete, 1 per call, ttl 86400", 86_400.0, 1, False),
    ("complete, 1 per call, ttl 86400, a waiter subscribed", 86_400.0, 1, True),
    ("complete_each(100), ttl 0", 0.0, 100, False),
    ("complete_each(100), ttl 86400", 86_400.0, 100, False),
    ("complete_each(100), ttl 86400, a waiter subscribed", 86_400.0, 100, True),
]


def _keeps_results() -> bool:
    return "result_ttl" in inspect.signature(Queue.__init__).parameters


async def _case(url: str, ttl: float, per_call: int, waiter: bool, jobs: int) -> float:
    """Engine µs per completed job of one case."""
    options: dict[str, Any] = {"result_ttl": ttl} if ttl else {}
    queue = await Queue.connect(url, f"bench-results-{uuid.uuid4().hex[:8]}", **options)
    listener = None
    try:
        if waiter:
            listener = Connector(queue.wire.options, version_fence=None, on_push=lambda _: None)
            await listener.connect()
            listener.send_no_reply("SSUBSCRIBE", queue.keys.root + "done")
            await listener.call("PING")
        await queue.enqueue_many(range(jobs))
        leased = []
        while len(leased) < jobs:
            got = await queue.claim_batch(1000, lease=600)
            assert isinstance(got, list)
            leased += got
        await queue.wire.call("CONFIG", "RESETSTAT")
        for start in range(0, jobs, per_call):
            chunk = leased[start : start + per_call]
            if per_call == 1:
                await queue.complete(chunk[0])
            else:
                await queue.complete_each(chunk)
        per_script = await engine_usec_per_script(queue)
        return per_script / per_call
    finally:
        if listener is not None:
            await listener.close()
        await discard(queue)


async def _measure(url: str, runs: int, jobs: int) -> dict[str, float]:
    figures: dict[str, list[float]] = {}
    for _ in range(runs):
        for label, ttl, per_call, waiter in CASES:
            if ttl and not _keeps_results():
                continue
            figures.setdefault(label, []).append(await _case(url, ttl, per_call, waiter, jobs))
    return {label: statistics.median(values) for label, values in figures.items()}


def _linked(lua: Path, name: str) -> Script:
    """``name``.lua of a lua folder, linked with that folder's helpers (as its registry would)."""
    library = "".join(p.read_text("utf-8") for p in sorted(lua.glob("_*.lua")))
    return Script.from_source(name, _link(_helpers(library), (lua / f"{name}.lua").read_text()))


async def _script_cost(url: str, script: Script, args: Callable[[Job], list[Any]], n: int) -> float:
    """Engine µs per call of ``script`` completing ``n`` leased jobs one per call."""
    queue = await Queue.connect(url, f"bench-results-{uuid.uuid4().hex[:8]}")
    try:
        await queue.enqueue_many(range(n))
        leased: list[Job] = []
        while len(leased) < n:
            got = await queue.claim_batch(1000, lease=600)
            assert isinstance(got, list)
            leased += got
        await queue.wire.call("SCRIPT", "LOAD", script.source)
        await queue.wire.call("CONFIG", "RESETSTAT")
        keys = (queue.keys.root, queue.keys.gate)
        for job in leased:
            await queue.wire.call(*script.command(keys, args(job)))
        return await engine_usec_per_script(queue)
    finally:
        await discard(queue)


async def _scripts_side_by_side(url: str, old: Script, new: Script, runs: int, n: int) -> None:
    """The two complete.lua alone, ttl 0, one job per call, alternated in one process: the
    host's noise hits both alike (the figure the ttl-0 promise is held to)."""
    sides: list[tuple[str, Script, Callable[[Job], list[Any]]]] = [
        ("before results", old, lambda j: [j.id, j.attempts]),
        ("with results, ttl 0", new, lambda j: [0, j.id, j.attempts, ""]),
    ]
    figures: dict[str, list[float]] = {label: [] for label, _, _ in sides}
    for run in range(runs):
        for label, script, args in sides if run % 2 == 0 else sides[::-1]:
            figures[label].append(await _script_cost(url, script, args, n))
    print("\n| complete.lua alone, 1 job per call | engine µs per call |\n|---|---:|")
    for label, values in figures.items():
        print(f"| {label} | {statistics.median(values):.2f} |")


def _other(src: str, url: str, runs: int, jobs: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src}
    command = [sys.executable, __file__, "--url", url, "--runs", str(runs), "--jobs", str(jobs)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", help="an existing server instead of the embedded one")
    parser.add_argument("--old", help="an earlier checkout's src, measured alternately")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=5000)
    args = parser.parse_args()
    if args.url and not args.old:
        # One side's figures as a JSON line (what --old runs for the other checkout).
        print(json.dumps(asyncio.run(_measure(args.url, args.runs, args.jobs))))
        return 0
    with EmbeddedValkey() as server:
        print(f"embedded valkey {server.version}; {args.runs} runs of {args.jobs} jobs per case")
        new: dict[str, list[float]] = {}
        old: dict[str, list[float]] = {}
        for _ in range(args.runs):
            # One run each at a time, alternated, so the host's noise hits both sides alike.
            if args.old:
                for label, value in _other(args.old, server.url, 1, args.jobs).items():
                    old.setdefault(label, []).append(value)
            for label, value in asyncio.run(_measure(server.url, 1, args.jobs)).items():
                new.setdefault(label, []).append(value)
        print("\n| case | engine µs per job | before results (µs per job) |\n|---|---:|---:|")
        for label, values in new.items():
            before = f"{statistics.median(old[label]):.2f}" if label in old else "—"
            print(f"| {label} | {statistics.median(values):.2f} | {before} |")
        if args.old:
            old_script = _linked(Path(args.old) / "echomq" / "engine" / "lua", "complete")
            new_script = _linked(LUA, "complete")
            asyncio.run(
                _scripts_side_by_side(server.url, old_script, new_script, args.runs, args.jobs)
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What every benchmark shares: ``--url`` or an embedded server, and the engine's own timings."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from echomq import Job, Queue
from echomq.engine.scripts import _helpers, _link
from echomq.server import EmbeddedValkey


def serve(
    parser: argparse.ArgumentParser, run: Callable[[str, argparse.Namespace], Awaitable[None]]
) -> int:
    """Parse the arguments (adding ``--url``), then run against that server or an embedded one."""
    parser.add_argument("--url", help="an existing server instead of the embedded one")
    args = parser.parse_args()
    if args.url:
        asyncio.run(run(args.url, args))
        return 0
    with EmbeddedValkey() as server:
        print(f"embedded valkey {server.version} on {server.host}:{server.port}")
        asyncio.run(run(server.url, args))
    return 0


async def commandstats(queue: Queue, command: str = "evalsha") -> tuple[int, float]:
    """``command``'s calls and the server's own µs in them since the last ``CONFIG RESETSTAT``
    (INFO commandstats); (0, 0.0) when it ran none."""
    info = (await queue.wire.call("INFO", "commandstats")).decode()
    for line in info.splitlines():
        if line.startswith(f"cmdstat_{command}:"):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            return int(fields["calls"]), float(fields["usec"])
    return 0, 0.0


async def engine_usec_per_script(queue: Queue, command: str = "evalsha") -> float:
    """The server's own µs per call of ``command`` (EVALSHA: per script) since the last
    ``CONFIG RESETSTAT``."""
    calls, usec = await commandstats(queue, command)
    return usec / calls if calls else 0.0


#: What the client sends itself: everything else in commandstats ran inside a script.
OUTSIDE = {"evalsha", "eval", "info", "config|resetstat", "script|load", "hello", "ping"}


async def inner_calls(queue: Queue) -> int:
    """Commands the server ran inside scripts so far (``INFO commandstats``, exact)."""
    info = (await queue.wire.call("INFO", "commandstats")).decode()
    total = 0
    for line in info.splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line.removeprefix("cmdstat_").split(":", 1)
            if name not in OUTSIDE:
                total += int(dict(kv.split("=") for kv in rest.split(","))["calls"])
    return total


async def script_stats(queue: Queue) -> tuple[float, int]:
    """(µs inside EVALSHA, commands run inside scripts) since the server started: one read, to
    take the difference of around a phase."""
    info = (await queue.wire.call("INFO", "commandstats")).decode()
    usec, inner = 0.0, 0
    for line in info.splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, rest = line.removeprefix("cmdstat_").split(":", 1)
        fields = dict(kv.split("=") for kv in rest.split(","))
        if name == "evalsha":
            usec = float(fields["usec"])
        elif name not in OUTSIDE:
            inner += int(fields["calls"])
    return usec, inner


def linked_scripts(src: Path, names: tuple[str, ...]) -> dict[str, str]:
    """The scripts ``names`` (``"claim"`` for claim.lua) of the checkout whose ``src`` this is,
    linked with its helper libraries: to load another tree's scripts beside this one's."""
    folder = src / "echomq" / "engine" / "lua"
    files = sorted(folder.glob("*.lua"))
    helpers = _helpers("".join(f.read_text() for f in files if f.name.startswith("_")))
    return {name: _link(helpers, (folder / f"{name}.lua").read_text()) for name in names}


async def claim_blocks(
    queues: dict[str, Queue], rounds: int, block: int
) -> dict[str, tuple[float, float]]:
    """Engine µs and inner commands per claim, per named queue: the queues take turns in
    blocks of ``block`` single claims (a noisy host weighs on each alike), ``rounds`` times;
    each block's share is the change of ``INFO commandstats`` across it. Every claim must
    find a job."""
    totals = {name: [0, 0.0, 0] for name in queues}  # claims, µs, inner commands
    for _ in range(rounds):
        for name, queue in queues.items():
            calls, usec = await commandstats(queue)
            inner = await inner_calls(queue)
            for _ in range(block):
                assert isinstance(await queue.claim(600), Job), "a claim found nothing"
            after_calls, after_usec = await commandstats(queue)
            total = totals[name]
            total[0] += after_calls - calls
            total[1] += after_usec - usec
            total[2] += await inner_calls(queue) - inner
    return {name: (usec / n, inner / n) for name, (n, usec, inner) in totals.items()}

"""``codemojex flood``: the subcommand's arguments and its run — an entry point, so it reads the
environment (``ECHOMQ_URL``: an existing Valkey instead of an embedded one; ``CODEMOJEX_DATA``:
where the PNG goes by default). The runner, the report's tables (rich) and the engine load when a
flood runs, not when ``codemojex --help`` declares these arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemojex.flood.scenario import SMALL, FloodOptions

if TYPE_CHECKING:
    from rich.console import Console

    from codemojex.flood.report import FloodReport
    from echomq.server import EmbeddedValkey


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < 3600:
        raise argparse.ArgumentTypeError(f"{value:g} s must be above 0 and below an hour")
    return value


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``flood`` on the ``codemojex`` command's subparsers."""
    flood = commands.add_parser(
        "flood",
        help="run the seeds' flood scenario in-process and report latency, fairness, send rate",
        description="One room floods, quiet rooms keep playing, finished games fan out a burst "
        "of result notifications; all against the real engine and the sandbox Bot API.",
    )
    flood.add_argument("--players", type=_count, help="players hammering the loud room")
    flood.add_argument("--guesses", type=_count, help="guesses each loud player sends")
    flood.add_argument("--quiet-rooms", type=_count, help="rooms playing at a human pace")
    flood.add_argument("--duration", type=_seconds, help="seconds the quiet rooms play")
    flood.add_argument("--seed", type=_seed, help="the scenario's seed (same seed, same plan)")
    flood.add_argument("--out", type=Path, help="the PNG to write (default: DATA/flood.png)")
    flood.add_argument("--small", action="store_true", help="the test suite's fast preset")
    flood.add_argument("--json", action="store_true", help="print the report as JSON")
    flood.set_defaults(run=run_command, parser=flood)


def options_from(args: argparse.Namespace) -> FloodOptions:
    """The preset (``--small`` or the default) with the arguments given on top."""
    base = SMALL if args.small else FloodOptions()
    changes: dict[str, Any] = {
        name: value
        for name, value in (
            ("players", args.players),
            ("guesses", args.guesses),
            ("quiet_rooms", args.quiet_rooms),
            ("duration", args.duration),
            ("seed", args.seed),
        )
        if value is not None
    }
    if args.duration is not None:
        # The flood starts a little after the quiet rooms, within whatever duration is asked.
        changes["flood_at"] = min(base.flood_at, args.duration / 10)
    return dataclasses.replace(base, **changes)


def run_command(args: argparse.Namespace) -> int:
    """Run the flood; exit 0 when the report is sound (no 429, nothing unscored or lost)."""
    from rich.console import Console

    from codemojex.flood.report import render
    from echomq.server import EmbeddedValkey

    try:
        options = options_from(args)
    except ValueError as error:
        args.parser.error(str(error))
    out = args.out or Path(os.environ.get("CODEMOJEX_DATA", "var")) / "flood.png"
    url = os.environ.get("ECHOMQ_URL")
    console = Console(stderr=args.json)
    server: EmbeddedValkey | None = None
    if url is None:
        server = EmbeddedValkey()
        server.start()
        url = server.url
    try:
        report, png = asyncio.run(_run(options, url, out, console, is_live=not args.json))
    finally:
        if server is not None:
            server.stop()
    if args.json:
        json.dump(report.to_json() | {"png": str(png)}, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        render(report, console)
        console.print(f"plot: {png}")
    return 0 if report.is_sound else 1


async def _run(
    options: FloodOptions, url: str, out: Path, console: Console, *, is_live: bool
) -> tuple[FloodReport, Path]:
    from codemojex.flood.plot import plot  # matplotlib loads only when a flood runs
    from codemojex.flood.report import LiveProgress, summarise
    from codemojex.flood.run import run_flood

    if is_live and console.is_terminal:
        with LiveProgress(console) as live:
            trace = await run_flood(options, url, progress=live.update)
    else:
        trace = await run_flood(options, url)
    return summarise(trace), plot(trace, out)

"""The ``echomq`` command: read a live queue (``stats``, ``lanes``, ``ring``); ``--json``.

The server is named by ``--url`` or the ``ECHOMQ_URL`` environment variable.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from typing import Any

from ._errors import EchoMQError
from ._queue import Queue


async def _read(args: argparse.Namespace) -> Any:
    queue = await Queue.connect(args.url, args.queue, pool_size=1)
    try:
        if args.command == "stats":
            return dataclasses.asdict(await queue.counts())
        if args.command == "lanes":
            return [dataclasses.asdict(lane) for lane in await queue.lanes()]
        return await queue.ring()
    finally:
        await queue.close()


def _print(data: Any) -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            print(f"{key:<10} {value}")
    elif data and isinstance(data[0], dict):
        columns = list(data[0])
        print("  ".join(f"{c:>10}" for c in columns))
        for row in data:
            print("  ".join(f"{row[c]!s:>10}" for c in columns))
    else:
        for item in data:
            print(item)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="echomq", description=__doc__)
    parser.add_argument("--url", default=os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"))
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("stats", "jobs per state and the terminal counters"),
        ("lanes", "every lane: depth, in flight, ceiling, weight, rate, paused"),
        ("ring", "the serviceable lanes in the order they will be served"),
    ):
        commands.add_parser(name, help=text).add_argument("queue")
    args = parser.parse_args(argv)
    try:
        data = asyncio.run(_read(args))
    except EchoMQError as exc:
        print(f"echomq: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        _print(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())

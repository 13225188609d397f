"""What every benchmark shares: ``--url`` or an embedded server, and the engine's own timings."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable

from echomq import Queue
from echomq._server import EmbeddedValkey


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


async def engine_usec_per_script(queue: Queue) -> float:
    """The server's own µs per EVALSHA since the last ``CONFIG RESETSTAT`` (INFO commandstats)."""
    info = (await queue.wire.call("INFO", "commandstats")).decode()
    for line in info.splitlines():
        if line.startswith("cmdstat_evalsha:"):
            return float(line.split("usec_per_call=")[1].split(",")[0])
    return 0.0

"""What every benchmark shares: ``--url`` or an embedded server, and the engine's own timings."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable

from echomq import Queue
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

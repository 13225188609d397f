"""The ``codemojex`` command. ``codemojex up`` is the main job (``make run``).

For now it starts the embedded Valkey (AOF persistence in the data directory), proves the
queue end to end on it and prints a short health report. Later it grows into the whole game.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from codemojex.botcommand import add_command as add_bot_command
from codemojex.flood.command import add_command as add_flood_command
from echomq import Job, Queue
from echomq._server import EmbeddedValkey, ServerOptions


async def health(url: str) -> list[tuple[str, str]]:
    """Round-trip the engine: ping latency, and one job through enqueue → claim → complete."""
    queue = await Queue.connect(url, "codemojex.health", pool_size=1)
    try:
        started = time.perf_counter()
        await queue.wire.call("PING")
        ping_ms = (time.perf_counter() - started) * 1000
        info = await queue.wire.call("INFO", "server")
        fields = dict(line.split(":", 1) for line in info.decode().splitlines() if ":" in line)
        started = time.perf_counter()
        verdict = await queue.enqueue({"probe": True}, group="health")
        job = await queue.claim(lease=5)
        if not isinstance(job, Job) or job.id != verdict.id:
            raise RuntimeError(f"health round trip failed: claimed {job!r}")
        await queue.complete(job)
        round_trip_ms = (time.perf_counter() - started) * 1000
        counts = await queue.counts()
    finally:
        await queue.close()
    return [
        ("engine", f"valkey {fields.get('valkey_version', fields.get('redis_version', '?'))}"),
        ("ping", f"{ping_ms:.2f} ms"),
        ("job round trip", f"{round_trip_ms:.2f} ms (enqueue → claim → complete)"),
        ("health jobs completed", str(counts.completed)),
    ]


def up(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    url = os.environ.get("ECHOMQ_URL")
    server: EmbeddedValkey | None = None
    if url is None:
        server = EmbeddedValkey(ServerOptions(data_dir=data_dir / "valkey", appendonly=True))
        server.start()
        url = server.url
        print(f"embedded valkey {server.version} on {server.host}:{server.port} (pid {server.pid})")
        print(f"data directory  {data_dir}")
    try:
        for name, value in asyncio.run(health(url)):
            print(f"{name:<22} {value}")
        print("health: ok")
        return 0
    finally:
        if server is not None:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="codemojex", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="start the engine and report its health")
    start.add_argument("--data-dir", default=os.environ.get("CODEMOJEX_DATA", "var"))
    start.set_defaults(run=up)
    add_bot_command(commands)
    add_flood_command(commands)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())

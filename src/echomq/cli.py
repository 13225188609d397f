"""The ``echomq`` command: run workers (``worker``) and read a live queue (``stats``,
``lanes``, ``ring``; ``--json`` for scripts).

The server is named by ``--url`` or the ``ECHOMQ_URL`` environment variable.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import sys
from typing import Any

from ._capacity import measure, report
from ._consumer import ConsumerOptions
from ._errors import EchoMQError
from ._keys import Keyspace
from ._queue import Queue
from ._url import ConnectionOptions
from ._worker import WorkerOptions, load_handler, serve


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


def _worker(args: argparse.Namespace) -> int:
    # Everything is validated before any connection is made.
    handler = load_handler(args.handler)
    options = ConsumerOptions(
        concurrency=args.concurrency,
        lease=args.lease,
        beat=args.beat,
        max_attempts=args.max_attempts,
        batch=args.batch,
    )
    worker = WorkerOptions(
        consumers=args.consumers,
        metronome=args.metronome,
        pool_size=args.pool,
        summary_every=args.summary_every,
    )
    Keyspace(args.queue)
    ConnectionOptions.from_url(args.url)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(serve(args.url, args.queue, handler, options, worker))
    return 0


def _capacity(args: argparse.Namespace) -> int:
    try:
        Keyspace(args.queue)
        found = asyncio.run(
            measure(
                ConnectionOptions.from_url(args.url),
                args.queue,
                target=args.target,
                handler=args.handler_ms / 1000,
                concurrency=args.concurrency,
            )
        )
    except EchoMQError as exc:
        print(f"echomq capacity: {exc}", file=sys.stderr)
        return 1
    rows = report(found)
    if args.json:
        print(json.dumps(dict(rows), indent=2, ensure_ascii=False))
    else:
        for name, value in rows:
            print(f"{name:<30} {value}")
    return 0


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
    run = commands.add_parser("worker", help="run consumers of a queue until SIGTERM/SIGINT")
    run.add_argument("handler", help="package.module:async_function")
    run.add_argument("--queue", required=True)
    run.add_argument("--concurrency", type=int, default=10, help="jobs at once per consumer")
    run.add_argument("--consumers", type=int, default=1)
    run.add_argument("--metronome", action="store_true", help="one blocking read for the pool")
    run.add_argument("--pool", type=int, default=1, help="connections for non-blocking calls")
    run.add_argument("--lease", type=float, default=30.0, help="seconds")
    run.add_argument("--beat", type=float, default=1.0, help="seconds")
    run.add_argument("--max-attempts", type=int, default=3)
    run.add_argument("--batch", type=int, default=1, help="claim_batch size (1 = claim)")
    run.add_argument("--summary-every", type=float, default=60.0, help="seconds")
    size = commands.add_parser("capacity", help="measure the per-claim cost and size a pool")
    size.add_argument("--queue", required=True, help="probes run on <queue>.capacity-probe")
    size.add_argument("--target", type=float, default=1000.0, help="jobs/s to size for")
    size.add_argument("--handler-ms", type=float, default=0.0, help="time a handler takes")
    size.add_argument("--concurrency", type=int, default=10, help="jobs at once per consumer")
    args = parser.parse_args(argv)
    if args.command == "capacity":
        return _capacity(args)
    if args.command == "worker":
        try:
            return _worker(args)
        except EchoMQError as exc:
            print(f"echomq worker: {exc}", file=sys.stderr)
            return 2
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

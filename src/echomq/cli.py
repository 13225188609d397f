"""The ``echomq`` command: run workers (``worker``), size a pool (``capacity``), serve the
dashboard (``dashboard``), and read and steer a live queue (``echomq.ops.admin_verbs``).

The server is named by ``--url`` or the ``ECHOMQ_URL`` environment variable; the dashboard's
token by ``ECHOMQ_DASHBOARD_TOKEN`` (generated and printed once when unset).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from echomq import __version__
from echomq.consumers import loops
from echomq.consumers.options import ConsumerOptions
from echomq.consumers.worker import WorkerOptions, load_handler, load_target, serve
from echomq.engine.backoff import Exponential, Jitter
from echomq.engine.checks import count
from echomq.engine.keys import Keyspace
from echomq.errors import EchoMQError, InvalidArgument
from echomq.ops import admin_verbs, shard_verbs
from echomq.ops.capacity import measure, report
from echomq.tasks.runtime import serve_tasks
from echomq.wire.url import ConnectionOptions, seeds_from_url

if TYPE_CHECKING:
    from echomq.dashboard import DashboardApp


#: What ``echomq --help`` says: plain words, as a terminal shows them.
DESCRIPTION = (
    "Run workers (worker), size a pool (capacity), serve the dashboard (dashboard), and read "
    "and steer a live queue (stats, lanes, ring, dead, job, pause, resume, cool, uncool, weight, "
    "limit, reprocess, remove, cancel, drain; shards for a sharded queue's directory and lane "
    "moves). The server is named by --url or the ECHOMQ_URL "
    "environment variable; the dashboard's token by ECHOMQ_DASHBOARD_TOKEN (generated and "
    "printed once when unset)."
)

# The option fields whose flag is spelled otherwise (the rest: the field, "_" as "-").
_FLAGS = {"base": "backoff_base", "cap": "backoff_cap", "pool_size": "pool"}


def _worker(args: argparse.Namespace, argv: list[str]) -> int:
    # The handler is the application's, named from the folder the worker runs in (as uvicorn,
    # arq and celery do): that folder comes first on the import path.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    from echomq.tasks import App

    # Everything is validated before any connection is made (and before any child starts).
    loop_name, loop_factory = loops.choose(args.loop)
    target = load_target(args.handler)
    is_app = isinstance(target, App)
    handler = None if is_app else load_handler(args.handler)
    if not is_app and len(args.queue or ()) != 1:
        raise InvalidArgument("queue", args.queue, "a handler function serves one --queue")
    for name in args.queue or ():
        Keyspace(name)
    count(args.processes, "--processes", maximum=1024)
    level = logging.getLevelName(args.log_level.upper())
    if not isinstance(level, int):
        raise InvalidArgument("--log-level", args.log_level, "DEBUG, INFO, WARNING or ERROR")
    if args.concurrency is not None:
        concurrency = args.concurrency  # checked by ConsumerOptions: 0 is refused, not ignored
    else:
        concurrency = target.concurrency if is_app else 10
    try:
        options = ConsumerOptions(
            concurrency=concurrency,
            lease=args.lease,
            beat=args.beat,
            max_attempts=args.max_attempts,
            backoff=Jitter(Exponential(args.backoff_base, args.backoff_cap)),
            batch=args.batch,
            max_stalled=args.max_stalled,
            stop_timeout=args.stop_timeout,
        )
        worker = WorkerOptions(
            consumers=args.consumers,
            metronome=args.metronome,
            pool_size=args.pool,
            summary_every=args.summary_every,
        )
    except InvalidArgument as refused:  # named as the user typed it: the flag, not the field
        flag = "--" + _FLAGS.get(refused.argument, refused.argument).replace("_", "-")
        raise InvalidArgument(flag, refused.value, refused.reason) from None
    seeds_from_url(args.url)  # a bad URL fails here, before logging starts
    on_ready = _readiness(args.ready_fd)
    if not is_app and args.burst:
        raise InvalidArgument("burst", True, "--burst runs an App's worker (module:app)")
    logging.basicConfig(level=level, handlers=[_log_handler(args.log_format)])
    if args.processes > 1:
        from echomq.tasks.supervisor import supervise

        return supervise(
            argv, args.processes, args.stop_timeout, args.url if args.url_given else None
        )
    logging.getLogger("echomq.worker").info("echomq worker: event loop %s", loop_name)
    try:
        if is_app:
            if args.url_given:
                target.url = args.url  # --url / ECHOMQ_URL names the server the worker serves
            main = serve_tasks(
                target, args.handler, args.queue, options, burst=args.burst, on_ready=on_ready
            )
            loops.run_on(loop_factory, main)
            return 0
        assert handler is not None
        loops.run_on(
            loop_factory,
            serve(args.url, args.queue[0], handler, options, worker, on_ready=on_ready),
        )
        return 0
    except InvalidArgument:
        raise
    except EchoMQError as exc:
        # Not a refusal of the arguments (exit 2, which the supervisor does not restart): a
        # failure while serving (no server, a startup hook that raised), which may pass; the
        # supervisor restarts it after its backoff.
        print(f"echomq worker: {exc}", file=sys.stderr)
        return 1


def _log_handler(log_format: str) -> logging.Handler:
    """The worker's log lines on stderr: plain (as ever) or one JSON object per line, both
    with secrets redacted (echomq.logs)."""
    from echomq.logs import JsonFormatter, TextFormatter

    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(name)s %(message)s"))
    return handler


def _readiness(fd: int | None) -> Callable[[], None] | None:
    """``--ready-fd FD`` (given by the supervisor to its children): a callback that writes one
    byte to FD and closes it once the worker is ready, so the supervisor tells a child killed
    while working from one that never got going."""
    if fd is None:
        return None
    if fd < 3:
        raise InvalidArgument("--ready-fd", fd, "a pipe's descriptor (3 or more)")
    try:
        os.set_inheritable(fd, False)  # the worker's own subprocesses must not hold the pipe
    except OSError:
        raise InvalidArgument("--ready-fd", fd, "not an open descriptor") from None

    def announce() -> None:
        with contextlib.suppress(OSError):
            try:
                os.write(fd, b"r")
            finally:
                os.close(fd)

    return announce


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


async def _serve_dashboard(app: DashboardApp, host: str, port: int) -> None:
    from echomq.dashboard import serving

    # SIGINT and SIGTERM end the block; leaving it closes the event streams, then the server.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with serving(app, host, port):
        await stop.wait()


def _dashboard(args: argparse.Namespace) -> int:
    from echomq.dashboard import create_app

    token = os.environ.get("ECHOMQ_DASHBOARD_TOKEN") or secrets.token_urlsafe(24)
    try:
        app = create_app(args.url, args.queue, token, interval=args.interval)
    except EchoMQError as exc:
        print(f"echomq dashboard: {exc}", file=sys.stderr)
        return 2
    shown = "<ECHOMQ_DASHBOARD_TOKEN>" if "ECHOMQ_DASHBOARD_TOKEN" in os.environ else token
    # Printed once, to the operator's terminal only: the page reads it from its own URL.
    print(f"echomq dashboard: http://{args.host}:{args.port}/?token={shown}", flush=True)
    try:
        asyncio.run(_serve_dashboard(app, args.host, args.port))
    except OSError as exc:
        print(f"echomq dashboard: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    # No abbreviations: `--proc 2` must not pass for `--processes 2` (the supervisor strips the
    # spelled-out options from its children's arguments, and a child that kept one would
    # supervise children of its own).
    parser = argparse.ArgumentParser(prog="echomq", description=DESCRIPTION, allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"echomq {__version__}")
    parser.add_argument("--url", default=None, help="default: $ECHOMQ_URL or the local server")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    commands = parser.add_subparsers(dest="command", required=True)
    admin_verbs.add_verbs(commands)
    shard_verbs.add_verb(commands)
    run = commands.add_parser(
        "worker", help="run an App's tasks (or a handler) until SIGTERM", allow_abbrev=False
    )
    run.add_argument("--url", default=argparse.SUPPRESS, help="as before the verb")
    run.add_argument("handler", help="package.module:app (an echomq App) or :async_function")
    run.add_argument(
        "--queue", action="append", help="serve this queue (repeat; default: the app's queues)"
    )
    run.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="jobs at once per queue (default: the App's concurrency, 10 unless it says; "
        "10 for a handler)",
    )
    run.add_argument(
        "--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default: %(default)s)"
    )
    run.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text lines, or one JSON object per line with the job's queue, lane, id and "
        "attempt (default: %(default)s)",
    )
    run.add_argument("--burst", action="store_true", help="exit once the queues are drained")
    run.add_argument(
        "--processes",
        type=int,
        default=1,
        help="worker processes, one per core (default: %(default)s)",
    )
    run.add_argument(
        "--loop",
        choices=loops.LOOPS,
        default="auto",
        help="the event loop: auto takes uvloop when installed (echomq[uvloop])"
        " (default: %(default)s)",
    )
    run.add_argument(
        "--stop-timeout",
        type=float,
        default=30.0,
        help="seconds for jobs to end (default: %(default)s)",
    )
    run.add_argument(
        "--backoff-base",
        type=float,
        default=1.0,
        help="first retry delay, seconds (default: %(default)s)",
    )
    run.add_argument(
        "--backoff-cap",
        type=float,
        default=60.0,
        help="longest retry delay, seconds (default: %(default)s)",
    )
    run.add_argument(
        "--consumers",
        type=int,
        default=1,
        help="consumers per queue in a process (default: %(default)s)",
    )
    run.add_argument("--metronome", action="store_true", help="one blocking read for the pool")
    run.add_argument(
        "--pool",
        type=int,
        default=1,
        help="connections for non-blocking calls (default: %(default)s)",
    )
    run.add_argument(
        "--lease",
        type=float,
        default=30.0,
        help="seconds a claimed job is held (default: %(default)s)",
    )
    run.add_argument(
        "--beat",
        type=float,
        default=1.0,
        help="seconds between upkeeps, and the longest idle wait (default: %(default)s)",
    )
    run.add_argument(
        "--max-attempts",
        type=int,
        default=3,
        help="attempts of tasks without retries of their own, and of handlers"
        " (default: %(default)s)",
    )
    run.add_argument(
        "--batch",
        type=int,
        default=None,
        help="most jobs per claim (default: as many as there are free slots; 1 = single claims)",
    )
    run.add_argument(
        "--max-stalled",
        type=int,
        default=3,
        help="expired leases (crashes) a job survives before it is dead as 'stalled'"
        " (default: %(default)s)",
    )
    run.add_argument(
        "--summary-every",
        type=float,
        default=60.0,
        help="seconds between summaries (default: %(default)s)",
    )
    # The supervisor's pipe to each child (--processes): not for people to type.
    run.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    size = commands.add_parser("capacity", help="measure the per-claim cost and size a pool")
    size.add_argument("--queue", required=True, help="probes run on <queue>.capacity-probe")
    size.add_argument("--target", type=float, default=1000.0, help="jobs/s to size for")
    size.add_argument("--handler-ms", type=float, default=0.0, help="time a handler takes")
    size.add_argument("--concurrency", type=int, default=10, help="jobs at once per consumer")
    board = commands.add_parser("dashboard", help="serve the live dashboard and /metrics")
    board.add_argument("--queue", action="append", required=True, help="repeat for more")
    board.add_argument("--host", default="127.0.0.1", help="0.0.0.0 exposes it: mind the token")
    board.add_argument("--port", type=int, default=8700)
    board.add_argument("--interval", type=float, default=1.0, help="seconds between snapshots")
    # The global options are taken after the verb too (`echomq stats q --json`), as people type
    # them; SUPPRESS keeps a value given before the verb when none is given after it.
    for verb in commands.choices.values():
        with contextlib.suppress(argparse.ArgumentError):  # the verb has its own
            verb.add_argument("--url", default=argparse.SUPPRESS, help="as before the verb")
        verb.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="as before the verb"
        )
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    # Whether --url or ECHOMQ_URL named the server: an App connects where it says otherwise.
    args.url_given = args.url is not None or "ECHOMQ_URL" in os.environ
    if args.url is None:
        args.url = os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379")
    if args.command == "dashboard":
        return _dashboard(args)
    if args.command == "capacity":
        return _capacity(args)
    if args.command == "worker":
        try:
            return _worker(args, argv)
        except EchoMQError as exc:
            print(f"echomq worker: {exc}", file=sys.stderr)
            return 2
    sharding = args.command == "shards"
    try:
        data = asyncio.run((shard_verbs if sharding else admin_verbs).run(args.url, args))
    except InvalidArgument as exc:
        print(f"echomq {args.command}: {exc}", file=sys.stderr)
        return 2
    except (EchoMQError, admin_verbs.NotFound) as exc:
        print(f"echomq {args.command}: {exc}", file=sys.stderr)
        return 1
    if sharding and not args.json:
        shard_verbs.show(data)
    else:
        admin_verbs.show(args.command, data, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

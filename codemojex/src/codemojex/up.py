"""``codemojex up`` (``make run``): the whole game in one process tree — the embedded Valkey with
AOF and SQLite in the data directory, the sandbox Bot API with its chat page (or Telegram with
``TELEGRAM_BOT_TOKEN``), the gateway, every worker, and the dashboard with ``/metrics``.

It prints a line per component as it becomes ready, then the URLs, then ``codemojex ready``.
One Ctrl-C (or SIGTERM) stops all of it: the gateway first, then the workers finish the jobs in
hand, then the dashboard, the Bot API and the engine. A second ``up`` on the same data directory
says who holds it. Reads the environment once, here: ``CODEMOJEX_DATA``, ``ECHOMQ_URL``,
``CODEMOJEX_DB``, ``TELEGRAM_BOT_TOKEN``, ``TELEGRAM_API_BASE``, ``CODEMOJEX_SANDBOX_TOKEN``,
``ECHOMQ_DASHBOARD_TOKEN``.

The game's modules (aiogram, SQLAlchemy, the sandbox: seconds to import) load when ``up`` runs,
not when ``codemojex --help`` declares its arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from codemojex.datadir import DataDir

SANDBOX_PORT = 8470
DASHBOARD_PORT = 8471


def add_command(commands: Any) -> None:
    """Register ``up`` on the ``codemojex`` command's subparsers."""
    up = commands.add_parser(
        "up", help="run the whole game: engine, Bot API sandbox + chat page, workers, dashboard"
    )
    up.add_argument("--data-dir", default=os.environ.get("CODEMOJEX_DATA", "var"))
    up.add_argument("--host", default="127.0.0.1", help="where the chat page and dashboard bind")
    up.add_argument(
        "--public-host",
        action="append",
        default=[],
        type=host_name,
        help="a name the chat page and dashboard are reached by (say, with --host 0.0.0.0); "
        "other Host headers get 421. Repeat for more",
    )
    up.add_argument("--sandbox-port", type=int, default=SANDBOX_PORT, help="0 picks a free one")
    up.add_argument("--dashboard-port", type=int, default=DASHBOARD_PORT, help="0: a free one")
    up.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    """Run until Ctrl-C or SIGTERM: 0 on a clean stop, 2 when the game cannot start."""
    from codemojex.datadir import DataDir
    from codemojex.domain import CodemojexError
    from codemojex.launch import engine
    from echomq import EchoMQError

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    data = DataDir(Path(args.data_dir).resolve())
    try:
        with data.locked():
            say(f"codemojex up: data in {data.root}")
            with engine(data, os.environ, say) as echomq_url:
                asyncio.run(_serve(args, data, echomq_url))
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass  # Ctrl-C or SIGTERM cancelled the game and it stopped cleanly; say so below
    except (CodemojexError, EchoMQError, OSError) as error:
        say(f"codemojex up: {error}")
        return 2
    say("stopped")
    return 0


def host_name(text: str) -> str:
    """``--public-host``'s check: a host name (argparse reports the ValueError)."""
    from echomq.dashboard import Hosts

    Hosts([text])
    return text


def say(line: str) -> None:
    print(line, flush=True)


def echomq_program() -> str:
    """How a new shell runs this environment's ``echomq``: the script beside this Python (the
    virtualenv's ``bin/echomq``, which works without the venv on ``PATH``), else this Python's
    ``-m echomq``."""
    beside = Path(sys.executable).parent / "echomq"
    if beside.is_file() and os.access(beside, os.X_OK):
        return shlex.quote(str(beside))
    return f"{shlex.quote(sys.executable)} -m echomq"


def stats_command(url: str, queue: str, *, program: str | None = None) -> str:
    """The ``echomq`` line an operator pastes to read ``queue`` on the engine at ``url``
    (``program``: how to run echomq, :func:`echomq_program` by default). A URL with a password
    is never printed: only ``ECHOMQ_URL`` can carry one (the embedded Valkey has none), so the
    line names that variable instead, as the dashboard's line names its token."""
    shown = '"$ECHOMQ_URL"' if urlsplit(url).password is not None else shlex.quote(url)
    return f"{program or echomq_program()} --url {shown} stats {shlex.quote(queue)}"


FAVICON: Final = Path(__file__).parent / "telegram" / "sandbox" / "static" / "favicon.svg"
"""The game's icon (the chat page's), which the dashboard serves for ``/favicon.ico`` too."""


async def _serve(args: argparse.Namespace, data: DataDir, echomq_url: str) -> None:
    from codemojex.app import BotSettings, running
    from codemojex.launch import bot_api
    from codemojex.notify.consumer import NotificationConsumer
    from codemojex.notify.metrics import NotificationMetrics
    from codemojex.store.lookups import lane_labels
    from echomq.dashboard import create_app, serving
    from echomq.metrics import Metrics

    # SIGTERM stops like Ctrl-C: the main task is cancelled and every block below unwinds.
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    hosts = args.public_host
    async with bot_api(
        os.environ, say, host=args.host, port=args.sandbox_port, hosts=hosts, data_dir=data.sandbox
    ) as api:
        settings = BotSettings(
            echomq_url=echomq_url,
            store_url=os.environ.get("CODEMOJEX_DB") or data.database_url,
            telegram=api.config,
            data_dir=data.root,
        )
        # The consumers feed the metrics from their first claim; the queues it reads are only
        # known once the stack has built them.
        metrics = Metrics([])
        async with running(settings, _ready, observer=metrics) as stack:
            queues = stack.pipeline.queues
            metrics.queues.extend([queues.score, queues.settle, queues.notify, queues.commands])
            notify = stack.consumers["notification worker"]
            if isinstance(notify, NotificationConsumer):
                metrics.registry.register(NotificationMetrics(lambda: notify.counts))
            # A token the operator chose stays off the screen; else the data directory's, kept
            # across runs (a tab left open keeps acting), is shown in the URL for the console.
            chosen = os.environ.get("ECHOMQ_DASHBOARD_TOKEN")
            token = chosen or data.dashboard_token()
            store = stack.pipeline.store

            async def lane_names(queue: str, lanes: Sequence[str]) -> dict[str, str]:
                # Operators read players and rooms, not PLR ids and chat ids.
                async with store.read() as session:
                    return await lane_labels(session, lanes)

            dashboard = create_app(
                queues.wire,
                [queue.name for queue in metrics.queues],
                token,
                metrics=metrics,
                hosts=hosts,
                lane_label=lane_names,
                favicon=FAVICON.read_bytes(),
            )
            async with serving(dashboard, args.host, args.dashboard_port) as base:
                say(f"dashboard ready ({base})")
                say("")
                if api.sandbox is not None:
                    page = api.sandbox.chat_page_url
                    if os.environ.get("CODEMOJEX_SANDBOX_TOKEN"):
                        page = f"{api.sandbox.url}/?token=$CODEMOJEX_SANDBOX_TOKEN"
                    say(f"  chat page  {page}")
                shown = "?token=$ECHOMQ_DASHBOARD_TOKEN" if chosen else f"?token={token}"
                say(f"  dashboard  {base}/{shown}")
                say(f"  metrics    {base}/metrics")
                say(f"  queues     {', '.join(queue.name for queue in metrics.queues)}")
                say(f"  inspect    {stats_command(echomq_url, queues.notify.name)}")
                say("")
                where = "in the chat page" if api.sandbox is not None else "to the bot in Telegram"
                say(f"codemojex ready: send /play {where} (Ctrl-C stops everything)")
                await stack.wait()


def _ready(component: str, detail: str) -> None:
    say(f"{component} ready ({detail})")

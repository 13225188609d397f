"""``codemojex bot``: the gateway and every worker of the game, on Telegram or on the sandbox.

An application entry point, so it reads the environment, once: ``TELEGRAM_BOT_TOKEN`` and
``TELEGRAM_API_BASE`` (never printed nor logged; without a token an in-process sandbox Bot API
stands in and its chat page is printed), ``ECHOMQ_URL`` (else the embedded Valkey in the data
directory), ``CODEMOJEX_DB`` (else SQLite in the data directory), ``TELEGRAM_WEBHOOK_SECRET``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from codemojex.app import BotSettings, Mode, run_bot
from codemojex.datadir import DataDir
from codemojex.domain import CodemojexError
from codemojex.telegram.transport import TELEGRAM_API_BASE, TelegramConfig
from codemojex.telegram.webhook import WebhookOptions, new_secret
from echomq._server import EmbeddedValkey, ServerOptions


def add_command(commands: Any) -> None:
    """Register ``bot`` on the ``codemojex`` command's subparsers."""
    bot = commands.add_parser(
        "bot", help="run the Telegram bot: gateway + workers (the sandbox when no token is set)"
    )
    bot.add_argument("--data-dir", default=os.environ.get("CODEMOJEX_DATA", "var"))
    bot.add_argument("--mode", choices=("polling", "webhook"), default="polling")
    bot.add_argument("--webhook-host", default="127.0.0.1", help="where the webhook listens")
    bot.add_argument("--webhook-port", type=int, default=8443)
    bot.add_argument("--webhook-url", default=None, help="the public URL Telegram posts to")
    bot.set_defaults(run=main)


def main(args: argparse.Namespace) -> int:
    """Run until Ctrl-C; 0 on a clean stop, 2 when the bot cannot run (bad token, …)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("aiogram.event").setLevel(logging.WARNING)  # one line per update: noise
    data = DataDir(Path(args.data_dir).resolve())
    try:
        with data.locked(), _engine(data) as echomq_url:
            asyncio.run(_serve(args, data, echomq_url))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("stopped")
    except CodemojexError as error:
        print(f"codemojex bot: {error}")
        return 2
    return 0


@contextlib.contextmanager
def _engine(data: DataDir) -> Iterator[str]:
    url = os.environ.get("ECHOMQ_URL")
    if url:
        yield url
        return
    server = EmbeddedValkey(ServerOptions(data_dir=data.valkey, appendonly=True))
    server.start()
    try:
        print(f"embedded valkey {server.version} on {server.host}:{server.port}")
        yield server.url
    finally:
        server.stop()


@asynccontextmanager
async def _telegram() -> AsyncIterator[TelegramConfig]:
    token = os.environ.get("TELEGRAM_BOT_TOKEN")
    if token:
        yield TelegramConfig(token, base=os.environ.get("TELEGRAM_API_BASE", TELEGRAM_API_BASE))
        return
    from codemojex.telegram.sandbox import Sandbox, SandboxOptions

    async with Sandbox(SandboxOptions()) as sandbox:
        print("no TELEGRAM_BOT_TOKEN: talking to an in-process sandbox Bot API")
        print(f"sandbox chat page: {sandbox.chat_page_url}", flush=True)
        yield TelegramConfig(sandbox.options.bot_token, base=sandbox.url)


async def _serve(args: argparse.Namespace, data: DataDir, echomq_url: str) -> None:
    # SIGTERM stops as cleanly as Ctrl-C: the consumers finish the jobs in hand.
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    mode: Mode = "webhook" if args.mode == "webhook" else "polling"
    async with AsyncExitStack() as stack:
        telegram = await stack.enter_async_context(_telegram())
        settings = BotSettings(
            echomq_url=echomq_url,
            store_url=os.environ.get("CODEMOJEX_DB") or data.database_url,
            telegram=telegram,
            mode=mode,
            data_dir=data.root,
            webhook=WebhookOptions(
                secret=os.environ.get("TELEGRAM_WEBHOOK_SECRET") or new_secret(),
                host=args.webhook_host,
                port=args.webhook_port,
                public_url=args.webhook_url,
            ),
        )
        await run_bot(settings, _print_ready)


def _print_ready(component: str, detail: str) -> None:
    print(f"{component} ready ({detail})", flush=True)

"""``codemojex bot``: the gateway and every worker of the game, on Telegram or on the sandbox.

An application entry point, so it reads the environment, once: ``TELEGRAM_BOT_TOKEN`` and
``TELEGRAM_API_BASE`` (never printed nor logged; without a token an in-process sandbox Bot API
stands in and its chat page is printed), ``ECHOMQ_URL`` (else the embedded Valkey in the data
directory), ``CODEMOJEX_DB`` (else SQLite in the data directory), ``TELEGRAM_WEBHOOK_SECRET``.

The bot's modules (aiogram, SQLAlchemy, the sandbox) load when it runs, not when ``codemojex
--help`` declares its arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemojex.app import Mode
    from codemojex.bot.webhook import WebhookOptions
    from codemojex.datadir import DataDir


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
    from codemojex.bot.webhook import WebhookOptions, new_secret
    from codemojex.datadir import DataDir
    from codemojex.domain import CodemojexError
    from codemojex.launch import engine

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("aiogram.event").setLevel(logging.WARNING)  # one line per update: noise
    data = DataDir(Path(args.data_dir).resolve())
    try:
        # Checked before anything starts: a bad secret is a one-line refusal, not a traceback.
        webhook = WebhookOptions(
            secret=os.environ.get("TELEGRAM_WEBHOOK_SECRET") or new_secret(),
            host=args.webhook_host,
            port=args.webhook_port,
            public_url=args.webhook_url,
        )
    except ValueError as error:
        print(f"codemojex bot: TELEGRAM_WEBHOOK_SECRET or the webhook options: {error}")
        return 2
    try:
        with data.locked(), engine(data, os.environ, _say) as echomq_url:
            asyncio.run(_serve(args, data, echomq_url, webhook))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("stopped")
    except CodemojexError as error:
        print(f"codemojex bot: {error}")
        return 2
    except OSError as error:  # a port in use, an address that is not ours: the host's answer
        print(f"codemojex bot: cannot start: {error}")
        return 2
    return 0


async def _serve(
    args: argparse.Namespace, data: DataDir, echomq_url: str, webhook: WebhookOptions
) -> None:
    from codemojex.app import BotSettings, run_bot
    from codemojex.launch import bot_api

    # SIGTERM stops as cleanly as Ctrl-C: the consumers finish the jobs in hand.
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    mode: Mode = "webhook" if args.mode == "webhook" else "polling"
    async with AsyncExitStack() as stack:
        api = await stack.enter_async_context(bot_api(os.environ, _say, data_dir=data.sandbox))
        if api.sandbox is not None:
            _say(f"sandbox chat page: {api.sandbox.chat_page_url}")
        settings = BotSettings(
            echomq_url=echomq_url,
            store_url=os.environ.get("CODEMOJEX_DB") or data.database_url,
            telegram=api.config,
            mode=mode,
            data_dir=data.root,
            webhook=webhook,
        )
        await run_bot(settings, _print_ready)


def _print_ready(component: str, detail: str) -> None:
    _say(f"{component} ready ({detail})")


def _say(line: str) -> None:
    print(line, flush=True)

"""Run a sandbox on its own: ``python -m codemojex.telegram.sandbox [--port N] …``. It prints the
Bot API base and the chat page's URL (with its control token, for the person at this console; the
bot token is never printed) and serves until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from codemojex.telegram.sandbox.errors import SandboxError
from codemojex.telegram.sandbox.options import SandboxLimits, SandboxOptions
from codemojex.telegram.sandbox.server import Sandbox


def parse(argv: list[str] | None = None) -> SandboxOptions:
    parser = argparse.ArgumentParser(
        prog="python -m codemojex.telegram.sandbox", description=__doc__
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8081, help="port to bind, 0 = any (8081)")
    parser.add_argument(
        "--public-host",
        action="append",
        default=[],
        help="a name the sandbox is reached by besides loopback and --host (other Host "
        "headers get 421); repeat for more",
    )
    parser.add_argument("--bot-token", default="100000:sandbox", help="the token the API accepts")
    parser.add_argument(
        "--control-token", help="guards the chat page (random, or the one kept in --data-dir)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="keep the chats and the chat page's token here across restarts (none: forget)",
    )
    parser.add_argument(
        "--no-limits", action="store_true", help="answer no 429s (a demo, never a flood test)"
    )
    args = parser.parse_args(argv)
    extra = {"control_token": args.control_token} if args.control_token else {}
    try:
        return SandboxOptions(
            host=args.host,
            port=args.port,
            bot_token=args.bot_token,
            limits=SandboxLimits(is_enforced=not args.no_limits),
            hosts=tuple(args.public_host),
            data_dir=args.data_dir,
            **extra,
        )
    except ValueError as error:
        parser.error(str(error))


async def serve(options: SandboxOptions) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    async with Sandbox(options) as sandbox:
        print(f"Bot API base: {sandbox.url}", flush=True)
        print(f"Chat page:    {sandbox.chat_page_url}", flush=True)
        await stopping.wait()


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    try:
        asyncio.run(serve(options))
    except SandboxError as error:  # a file in --data-dir it cannot use: say which, and why
        print(f"sandbox: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

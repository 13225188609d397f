"""What ``codemojex bot`` and ``codemojex up`` both start before the game: the engine (the
embedded Valkey with AOF in the data directory, unless ``ECHOMQ_URL`` names one) and the Bot API
(Telegram when a token is set, else an in-process sandbox with its chat page).

Application code: it reads the environment it is handed, once, and prints what it started.
Tokens are never printed; the sandbox's chat page URL carries its control token on purpose, for
the person at the console.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from codemojex.datadir import DataDir
from codemojex.telegram.sandbox import Sandbox, SandboxOptions
from codemojex.telegram.transport import TELEGRAM_API_BASE, TelegramConfig
from echomq.server import EmbeddedValkey, ServerOptions

Say = Callable[[str], None]


@contextlib.contextmanager
def engine(data: DataDir, env: Mapping[str, str], say: Say) -> Iterator[str]:
    """The engine's URL for the block: ``ECHOMQ_URL``, or an embedded Valkey stopped after it."""
    url = env.get("ECHOMQ_URL")
    if url:
        say("valkey ready (ECHOMQ_URL)")
        yield url
        return
    server = EmbeddedValkey(ServerOptions(data_dir=data.valkey, appendonly=True))
    server.start()
    try:
        say(
            f"valkey ready ({server.version} on {server.host}:{server.port}, "
            f"pid {server.pid}, AOF in {data.valkey})"
        )
        yield server.url
    finally:
        server.stop()


@dataclass(frozen=True, slots=True)
class BotApi:
    """The Bot API the game talks to, and the sandbox when it is one."""

    config: TelegramConfig
    sandbox: Sandbox | None = None


@asynccontextmanager
async def bot_api(
    env: Mapping[str, str],
    say: Say,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    hosts: Sequence[str] = (),
    data_dir: Path | None = None,
) -> AsyncIterator[BotApi]:
    """Telegram when ``TELEGRAM_BOT_TOKEN`` is set (``TELEGRAM_API_BASE`` overrides its URL),
    else a sandbox on ``host:port`` for the block, answering to ``hosts`` too (public names;
    see ``SandboxOptions.hosts``), keeping its chats and chat page token in ``data_dir``."""
    token = env.get("TELEGRAM_BOT_TOKEN")
    if token:
        say("telegram: using TELEGRAM_BOT_TOKEN")
        yield BotApi(TelegramConfig(token, base=env.get("TELEGRAM_API_BASE", TELEGRAM_API_BASE)))
        return
    # Update ids only grow on Telegram, and the bot remembers the ones it handled: a sandbox
    # restarted in front of the same data starts above every id an earlier run handed out.
    options = SandboxOptions(
        host=host,
        port=port,
        first_update_id=time.time_ns() // 1_000_000,
        hosts=tuple(hosts),
        data_dir=data_dir,
    )
    if env.get("CODEMOJEX_SANDBOX_TOKEN"):
        options = dataclasses.replace(options, control_token=env["CODEMOJEX_SANDBOX_TOKEN"])
    sandbox = Sandbox(options)
    try:
        await sandbox.start()
    except OSError as error:
        await sandbox.stop()
        raise OSError(
            f"the sandbox cannot listen on {host}:{port} ({error.strerror}): "
            "pass --sandbox-port 0 for a free port"
        ) from None
    try:
        say(f"sandbox ready (no TELEGRAM_BOT_TOKEN: a local Bot API at {sandbox.url})")
        yield BotApi(TelegramConfig(options.bot_token, base=sandbox.url), sandbox)
    finally:
        await sandbox.stop()

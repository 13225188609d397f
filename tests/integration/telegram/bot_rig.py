"""The rig the gateway, command and game tests share (no tests of its own): the sandbox Bot API
(conftest), the whole bot (:func:`codemojex.app.running`) on the session's Valkey under
the test's prefix and on a SQLite file under ``tmp_path``, and helpers that wait for the bot's
messages in the sandbox.

Test modules import ``bot_fixture`` (it registers as ``bot``); the ``sandbox`` fixture comes
from this directory's conftest.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from codemojex.app import BotSettings, BotStack, running
from codemojex.bot.gateway import PollingOptions
from codemojex.keyspace import Keyspace
from codemojex.pipeline import forget as forget_deployment
from codemojex.store import Store, current_game, game_secret, sqlite_url
from codemojex.store.models import RoomRow
from codemojex.telegram.sandbox import Sandbox, SentMessage
from codemojex.telegram.transport import TelegramConfig
from echomq import ConnectionOptions
from echomq.wire import Pool

ADA, BOB, CY, DEE = 1001, 1002, 1003, 1004
LOUNGE = -1001


def settings_for(sandbox: Sandbox, valkey_url: str, prefix: str, data: Path) -> BotSettings:
    """The bot's settings against ``sandbox``, its keys under ``prefix``, its SQLite in ``data``."""
    return BotSettings(
        echomq_url=valkey_url,
        store_url=sqlite_url(data / "codemojex.db"),
        telegram=TelegramConfig(sandbox.options.bot_token, base=sandbox.url, timeout=10.0),
        data_dir=data,
        prefix=prefix,
        pool_size=2,
        polling=PollingOptions(timeout=2),
        sweep_every=1.0,
    )


@pytest.fixture(name="bot")
async def bot_fixture(
    sandbox: Sandbox, valkey_url: str, queue_name: str, tmp_path: Path
) -> AsyncIterator[BotStack]:
    """The whole bot, long polling ``sandbox``; every key it wrote is deleted afterwards."""
    prefix = f"{queue_name}."
    async with running(settings_for(sandbox, valkey_url, prefix, tmp_path)) as stack:
        yield stack
    await forget(valkey_url, prefix)


async def forget(valkey_url: str, prefix: str) -> None:
    """Delete the queues and keys of the bot deployed under ``prefix``."""
    pool = await Pool(ConnectionOptions.from_url(valkey_url), 1).connect()
    try:
        await forget_deployment(pool, Keyspace(prefix))
    finally:
        await pool.close()


async def wait_for(
    sandbox: Sandbox,
    chat: int,
    predicate: Callable[[SentMessage], bool],
    *,
    timeout: float = 20.0,
) -> SentMessage:
    """The first of the bot's messages to ``chat`` (new or edited) that satisfies ``predicate``.

    The sandbox wakes waiters on new messages only, so edits are polled with a deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        for message in sandbox.messages(chat):
            if predicate(message):
                return message
        left = deadline - time.monotonic()
        if left <= 0:
            texts = [message.text for message in sandbox.messages(chat)]
            raise AssertionError(f"no matching message in chat {chat} after {timeout}s: {texts}")
        count = len(sandbox.messages(chat))
        with contextlib.suppress(TimeoutError):
            await sandbox.wait_for_messages(chat, count + 1, timeout=min(left, 0.2))


async def wait_for_text(
    sandbox: Sandbox, chat: int, part: str, timeout: float = 20.0
) -> SentMessage:
    """The first of the bot's messages to ``chat`` whose text contains ``part``."""
    return await wait_for(sandbox, chat, lambda message: part in message.text, timeout=timeout)


async def secret_of(store: Store, chat: int) -> tuple[str, ...]:
    """The secret of ``chat``'s open game, read from the system of record (never shown)."""
    async with store.read() as session:
        room = await session.scalar(select(RoomRow.id).where(RoomRow.telegram_chat_id == chat))
        assert room is not None, f"no room for chat {chat}"
        game = await current_game(session, room)
        assert game is not None, f"no open game in chat {chat}"
        return await game_secret(session, game.id)

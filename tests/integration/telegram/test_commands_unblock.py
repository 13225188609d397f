"""A user who blocked the bot and unblocked it is served again: the notification worker marks
the chat at its 403 and the notifier skips it, until the user writes to the bot, which takes
the chat off the blocklist before the reply is enqueued."""

from __future__ import annotations

import asyncio
import time

from bot_rig import ADA, LOUNGE, bot_fixture, wait_for_text  # noqa: F401

from codemojex.app import BotStack
from codemojex.notify.api import Skipped
from codemojex.telegram.sandbox import Sandbox


async def _until_blocked(bot: BotStack, chat: int, timeout: float = 20.0) -> None:
    """Poll the blocklist with a deadline (the worker's 403 is a job's outcome: no event)."""
    deadline = time.monotonic() + timeout
    while not await bot.services.notifier.blocklist.has(chat):
        assert time.monotonic() < deadline, f"chat {chat} was never marked blocked"
        await asyncio.sleep(0.05)


async def test_a_user_who_unblocks_the_bot_and_writes_gets_replies_again(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(ADA, "/start")
    await wait_for_text(sandbox, ADA, "Welcome to Codemojex")
    sandbox.block(ADA)
    await bot.services.reply(ADA, "lost: the user blocked the bot")
    await _until_blocked(bot, ADA)
    skipped = await bot.services.notifier.notify(ADA, "never enqueued")
    assert isinstance(skipped, Skipped)

    sandbox.unblock(ADA)
    before = len(sandbox.messages(ADA))
    sandbox.say(ADA, "/start")
    await sandbox.wait_for_messages(ADA, before + 1, timeout=20.0)
    assert "Welcome to Codemojex" in sandbox.messages(ADA)[-1].text
    assert not await bot.services.notifier.blocklist.has(ADA)
    assert not any("lost:" in message.text for message in sandbox.messages(ADA))


async def test_a_group_update_leaves_the_blocklist_alone(sandbox: Sandbox, bot: BotStack) -> None:
    await bot.services.notifier.blocklist.mark(ADA)
    sandbox.say(ADA, "/help", chat=LOUNGE)
    await wait_for_text(sandbox, LOUNGE, "/convert")
    assert await bot.services.notifier.blocklist.has(ADA)  # a group says nothing of ADA's chat

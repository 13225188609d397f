"""A group player who never started the bot (Telegram answers the bot's private sends with 403
"bot can't initiate conversation with a user"): the group is told once, with the deep link that
starts the bot; their private scores are held, never retried, and sent once they start it."""

from __future__ import annotations

import pytest
from aiogram import Bot
from aiogram.exceptions import TelegramForbiddenError
from bot_rig import ADA, LOUNGE, bot_fixture, wait_for_text  # noqa: F401

from codemojex.app import BotStack
from codemojex.telegram.sandbox import Sandbox
from codemojex.telegram.sandbox.methods import CANNOT_INITIATE

EVE = 1099
LINK = "https://t.me/codemojex_sandbox_bot?start=scores"


async def test_the_sandbox_refuses_private_sends_to_a_user_who_never_started_the_bot(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    sandbox.add_user(EVE, "Eve", has_started=False)
    with pytest.raises(TelegramForbiddenError) as refused:
        await sandbox_bot.send_message(EVE, "hello")
    assert CANNOT_INITIATE.endswith(refused.value.message)
    sandbox.say(EVE, "hi", chat=LOUNGE)  # a group message starts nothing
    with pytest.raises(TelegramForbiddenError):
        await sandbox_bot.send_message(EVE, "hello")
    sandbox.say(EVE, "/start")
    assert (await sandbox_bot.send_message(EVE, "hello")).text == "hello"


async def test_a_player_who_never_started_the_bot_is_told_once_and_gets_scores_on_start(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.add_user(EVE, "Eve", has_started=False)
    sandbox.say(ADA, "/play", chat=LOUNGE)
    await wait_for_text(sandbox, LOUNGE, "Ada started a new game")
    sandbox.say(EVE, "/guess 🍎🍌🍒🍇🐶🦊", chat=LOUNGE)
    hint = await wait_for_text(sandbox, LOUNGE, "Eve, I can't message you privately")
    assert LINK in hint.text
    sandbox.say(EVE, "/guess 🍌🍎🍒🍇🐶🦊", chat=LOUNGE)
    await wait_for_text(sandbox, LOUNGE, "Eve: 🍌🍎🍒🍇🐶🦊 → ")
    assert sandbox.messages(EVE) == []
    assert bot.services.notifier is not None
    assert await bot.services.notifier.blocklist.has(EVE)
    counts = await bot.pipeline.queues.notify.counts()
    assert (counts.dead, counts.failed) == (0, 0)  # held, never retried

    sandbox.say(EVE, "/start scores")  # the deep link's Start
    await wait_for_text(sandbox, EVE, "Your guess: Eve: 🍎🍌🍒🍇🐶🦊 → ")
    await wait_for_text(sandbox, EVE, "Your guess: Eve: 🍌🍎🍒🍇🐶🦊 → ")
    await wait_for_text(sandbox, EVE, "Welcome to Codemojex")
    told = [m for m in sandbox.messages(LOUNGE) if "can't message you privately" in m.text]
    assert len(told) == 1

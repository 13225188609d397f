"""A bad bot token stops the notification worker with a clear error, and loses nothing: every
notification stays in the queue for a worker with a good token."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from aiogram import Bot
from notify_rig import rig, running, until

from codemojex.notify.policy import BadTokenError, NotifyOptions
from codemojex.telegram import TelegramConfig, open_bot
from codemojex.telegram.sandbox import Sandbox
from echomq import Queue

WRONG = "424242:not-the-sandbox-token"
CHATS = (1001, 1002, 1003)


@pytest.fixture
async def wrong_bot(sandbox: Sandbox) -> AsyncIterator[Bot]:
    bot = open_bot(TelegramConfig(WRONG, base=sandbox.url))
    yield bot
    await bot.session.close()


async def pending_and_scheduled(queue: Queue) -> int:
    counts = await queue.counts()
    return counts.pending + counts.scheduled


async def test_a_bad_token_stops_the_worker_before_it_claims(
    sandbox: Sandbox, wrong_bot: Bot, queue: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    under = rig(queue, wrong_bot)
    for chat in CHATS:
        await under.notifier.notify(chat, f"hello {chat}")
    with (
        caplog.at_level(logging.ERROR, logger="codemojex.notify"),
        pytest.raises(BadTokenError) as raised,
    ):
        await under.consumer.run()
    error = raised.value
    assert error.reason == "bad_token"
    assert "refused the bot token" in str(error)
    assert "Unauthorized" in str(error)
    assert WRONG not in str(error)
    assert WRONG not in caplog.text
    assert "refused the bot token" in caplog.text
    assert under.consumer.tallies == {}  # it stopped before it started a consumer
    assert (await queue.counts()).pending == len(CHATS)
    assert sandbox.stats.delivered == 0


async def test_a_token_revoked_while_running_stops_the_worker_and_requeues_what_it_held(
    sandbox: Sandbox, sandbox_bot: Bot, wrong_bot: Bot, queue: Queue
) -> None:
    # As if revoked after a good start; what it held comes back after half a second.
    under = rig(queue, wrong_bot, options=NotifyOptions(bad_token_delay=0.5), check_token=False)
    for chat in CHATS:
        await under.notifier.notify(chat, f"hello {chat}")
    async with running(under.consumer) as run:
        with pytest.raises(BadTokenError):
            await run
    assert await pending_and_scheduled(queue) == len(CHATS)  # deferred, no attempt spent
    assert under.worker.counts.delivered == 0
    assert sandbox.stats.delivered == 0

    good = rig(queue, sandbox_bot)  # a worker with the right token delivers them all
    async with running(good.consumer):
        await until(lambda: good.worker.counts.delivered == len(CHATS), 30.0, "all delivered")
    assert sorted(sandbox.stats.by_chat) == sorted(CHATS)
    assert (await queue.counts()).dead == 0

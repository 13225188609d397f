"""The gateway against the sandbox and a real Valkey: long polling admits each batch in one
``enqueue_many`` (a lane per chat, deduplicated by ``update_id``) before confirming it; a
re-delivered update is handled once; malformed updates are dropped while the gateway runs on;
a bad token and an active webhook stop it with a clear error."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiogram import Bot
from bot_rig import (  # noqa: F401 (fixtures register)
    ADA,
    BOB,
    LOUNGE,
    bot_fixture,
    wait_for_text,
)

from codemojex.app import BotStack
from codemojex.bot.gateway import GatewayError, Poller, PollingOptions
from codemojex.bot.tasks import CommandTask, register
from codemojex.telegram.sandbox import Sandbox
from codemojex.telegram.transport import TelegramConfig, open_bot
from echomq import App, ConnectionOptions, EchoMQError, Queue
from echomq.wire import Pool


async def test_a_batch_is_admitted_a_lane_per_chat_then_confirmed(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue, command: CommandTask
) -> None:
    first = sandbox.say(ADA, "/help")
    sandbox.say(BOB, "/help")
    last = sandbox.say(ADA, "/me", chat=LOUNGE)
    poller = Poller(sandbox_bot, command, PollingOptions(timeout=0))

    assert await poller.poll_once() == 3
    assert poller.enqueued == 3
    assert poller.offset == last["update_id"] + 1
    assert (await queue.counts()).pending == 3
    lanes = {info.lane: info.depth for info in await queue.lanes([str(ADA), str(BOB), str(LOUNGE)])}
    assert lanes == {str(ADA): 1, str(BOB): 1, str(LOUNGE): 1}
    # Confirmed: the next poll brings nothing new.
    assert await poller.poll_once() == 0
    assert sandbox.pending_updates == 0
    assert first["update_id"] < last["update_id"]


async def test_a_batch_polled_again_before_confirming_is_admitted_once(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue, command: CommandTask
) -> None:
    update = sandbox.say(ADA, "/help")
    poller = Poller(sandbox_bot, command, PollingOptions(timeout=0))
    await poller.poll_once()
    sandbox.replay(update["update_id"])  # as if the confirmation had been lost
    await poller.poll_once()
    assert (poller.enqueued, poller.duplicate) == (1, 1)
    assert (await queue.counts()).pending == 1


async def test_the_same_update_delivered_twice_is_handled_once(
    sandbox: Sandbox, bot: BotStack
) -> None:
    update = sandbox.say(ADA, "/start")
    await wait_for_text(sandbox, ADA, "Welcome to Codemojex")
    sandbox.replay(update["update_id"])  # long after the first was handled and completed
    sandbox.say(ADA, "/board")  # a marker: the same lane, so handled after the replay
    await wait_for_text(sandbox, ADA, "No game is running")
    welcomes = [m for m in sandbox.messages(ADA) if "Welcome" in m.text]
    assert len(welcomes) == 1
    assert sandbox.stats.delivered == 2


async def test_malformed_updates_are_logged_dropped_and_the_gateway_runs_on(
    sandbox: Sandbox, bot: BotStack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="codemojex")
    sandbox.push_raw("not an update")
    sandbox.push_raw({"message": {"text": "no update_id"}})
    sandbox.push_raw({"update_id": 777_000, "message": "not an object"})
    sandbox.say(ADA, "/help")
    await wait_for_text(sandbox, ADA, "/convert")
    log = caplog.text
    assert "dropped a malformed update at position 0: a str" in log
    assert "dropped a malformed update at position 1: an object with keys ['message']" in log
    assert "update 777000: dropped, not a readable update" in log
    assert "no update_id" not in log  # the content of an update never reaches the log
    assert bot.tasks["gateway"].done() is False
    assert sandbox.pending_updates == 0


async def test_a_bad_token_stops_polling_with_a_clear_error(
    sandbox: Sandbox, queue: Queue, command: CommandTask
) -> None:
    bot = open_bot(TelegramConfig("100000:wrong-secret", base=sandbox.url))
    try:
        with pytest.raises(GatewayError) as caught:
            await Poller(bot, command, PollingOptions(timeout=0)).run()
    finally:
        await bot.session.close()
    assert caught.value.reason == "bad_token"
    assert "TELEGRAM_BOT_TOKEN" in str(caught.value)
    assert "wrong-secret" not in str(caught.value)
    assert (await queue.counts()).pending == 0


async def test_polling_while_a_webhook_is_set_says_so(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue, command: CommandTask
) -> None:
    await sandbox_bot.set_webhook("http://127.0.0.1:9/unused", secret_token="s3cret")
    with pytest.raises(GatewayError) as caught:
        await Poller(sandbox_bot, command, PollingOptions(timeout=0)).run()
    assert caught.value.reason == "webhook_active"
    assert "webhook" in str(caught.value)
    await sandbox_bot.delete_webhook()


async def test_a_batch_the_bus_did_not_take_is_not_confirmed(
    sandbox: Sandbox, sandbox_bot: Bot, valkey_url: str, queue: Queue, command: CommandTask
) -> None:
    update = sandbox.say(ADA, "/help")
    gone = await Pool(ConnectionOptions.from_url(valkey_url), 1).connect()
    await gone.close()  # the bus is gone: the enqueue fails
    broken = register(App(queue=queue.name, wire=gone), queue.name)
    poller = Poller(sandbox_bot, broken, PollingOptions(timeout=0))
    with pytest.raises(EchoMQError):
        await poller.poll_once()
    assert poller.offset is None  # nothing confirmed: the sandbox keeps the update

    poller.command = command  # the bus is back
    assert await poller.poll_once() == 1
    assert poller.offset == update["update_id"] + 1
    assert (await queue.counts()).pending == 1


async def test_network_errors_back_off_and_polling_goes_on(
    queue: Queue, command: CommandTask
) -> None:
    # Nothing listens on port 9 (discard): every getUpdates fails at the network level.
    bot = open_bot(TelegramConfig("100000:sandbox", base="http://127.0.0.1:9", timeout=2.0))
    poller = Poller(bot, command, PollingOptions(timeout=0, backoff=0.05, max_backoff=0.2))
    run = asyncio.create_task(poller.run())
    try:
        deadline = time.monotonic() + 10.0
        while poller.failures < 3:
            assert time.monotonic() < deadline, "the poller did not retry"
            assert not run.done(), "a network error stopped the poller"
            await asyncio.sleep(0.05)
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await bot.session.close()
    assert (await queue.counts()).pending == 0

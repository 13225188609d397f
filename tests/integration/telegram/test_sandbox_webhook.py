"""Webhook delivery: each update POSTed in order with the secret header, a refused POST retried,
and getUpdates refused (409) while the webhook is set."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiogram import Bot
from aiogram.exceptions import TelegramBadRequest
from aiohttp import web

from codemojex.telegram.sandbox import Sandbox


@dataclass
class Receiver:
    """A bot's webhook endpoint: records what arrives and refuses the first ``refusals`` POSTs."""

    refusals: int = 0
    received: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        secret = request.headers.get("X-Telegram-Bot-Api-Secret-Token")
        self.received.append((secret, await request.json()))
        self.arrived.set()
        if self.refusals > 0:
            self.refusals -= 1
            return web.Response(status=500)
        return web.Response(text="")

    async def wait_for(self, n: int) -> None:
        async with asyncio.timeout(10):
            while len(self.received) < n:
                self.arrived.clear()
                await self.arrived.wait()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    hook = Receiver()
    app = web.Application()
    app.router.add_post("/hook", hook.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    hook.url = f"http://{host}:{port}/hook"
    yield hook
    await runner.cleanup()


async def test_updates_are_posted_in_order_with_the_secret(
    sandbox: Sandbox, sandbox_bot: Bot, receiver: Receiver
) -> None:
    assert await sandbox_bot.set_webhook(receiver.url, secret_token="tok-EN_1")
    ids = [sandbox.say(1001, f"/guess {n}")["update_id"] for n in range(3)]
    await receiver.wait_for(3)
    assert [secret for secret, _ in receiver.received] == ["tok-EN_1"] * 3
    assert [update["update_id"] for _, update in receiver.received] == ids
    assert receiver.received[0][1]["message"]["text"] == "/guess 0"
    async with asyncio.timeout(5):  # the sandbox confirms once the third answer is read
        while sandbox.pending_updates:
            await asyncio.sleep(0.01)


async def test_a_refused_post_is_retried_until_taken(
    sandbox: Sandbox, sandbox_bot: Bot, receiver: Receiver
) -> None:
    receiver.refusals = 2
    await sandbox_bot.set_webhook(receiver.url, secret_token="s")
    update_id = sandbox.say(1002, "/play")["update_id"]
    await receiver.wait_for(3)
    assert [update["update_id"] for _, update in receiver.received] == [update_id] * 3
    info = await sandbox_bot.get_webhook_info()
    assert info.last_error_message is not None
    assert "500" in info.last_error_message


async def test_a_replay_is_posted_again(
    sandbox: Sandbox, sandbox_bot: Bot, receiver: Receiver
) -> None:
    await sandbox_bot.set_webhook(receiver.url)
    update_id = sandbox.say(1003, "/me")["update_id"]
    await receiver.wait_for(1)
    sandbox.replay(update_id)
    await receiver.wait_for(2)
    assert receiver.received[0] == receiver.received[1] == (None, receiver.received[0][1])


async def test_updates_wait_while_no_webhook_is_set(
    sandbox: Sandbox, sandbox_bot: Bot, receiver: Receiver
) -> None:
    sandbox.say(1001, "queued before the webhook")
    await sandbox_bot.set_webhook(receiver.url)
    await receiver.wait_for(1)
    assert await sandbox_bot.delete_webhook()
    sandbox.say(1001, "after the webhook")
    [update] = await sandbox_bot.get_updates()
    assert update.message is not None
    assert update.message.text == "after the webhook"
    assert len(receiver.received) == 1


@pytest.mark.parametrize(
    ("url", "secret"),
    [("ftp://example.org/hook", None), ("http://127.0.0.1/hook", "bad secret!")],
)
async def test_a_bad_webhook_is_refused(sandbox_bot: Bot, url: str, secret: str | None) -> None:
    with pytest.raises(TelegramBadRequest):
        await sandbox_bot.set_webhook(url, secret_token=secret)
    assert (await sandbox_bot.get_webhook_info()).url == ""

"""The webhook gateway: a POST must carry the secret token (else 401 and nothing is admitted);
a right one is admitted like a polled update; a body that is not an update (malformed, or too
deep to parse) is dropped with 200 and one warning; and the sandbox, told the webhook at start,
delivers its updates through it."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiogram import Bot
from bot_rig import (
    ADA,
    forget,
    settings_for,
    wait_for_text,
)

from codemojex.app import running
from codemojex.bot.tasks import CommandTask
from codemojex.bot.webhook import SECRET_HEADER, WebhookGateway, WebhookOptions
from codemojex.telegram.sandbox import Sandbox
from codemojex.telegram.transport import TelegramConfig, open_bot
from echomq import Job, Queue

SECRET = "right-secret_0123456789"


@pytest.fixture(name="webhook")
async def webhook_fixture(sandbox: Sandbox, command: CommandTask) -> AsyncIterator[WebhookGateway]:
    bot: Bot = open_bot(TelegramConfig(sandbox.options.bot_token, base=sandbox.url))
    try:
        async with WebhookGateway(bot, command, WebhookOptions(secret=SECRET)) as gateway:
            yield gateway
    finally:
        await bot.session.close()


def an_update(update_id: int) -> dict[str, object]:
    chat = {"id": ADA, "type": "private", "first_name": "Ada"}
    sender = {"id": ADA, "is_bot": False, "first_name": "Ada"}
    message = {"message_id": 1, "date": 0, "chat": chat, "from": sender, "text": "/help"}
    return {"update_id": update_id, "message": message}


async def post(url: str, body: object, headers: dict[str, str]) -> int:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=body, headers=headers) as r,
    ):
        return r.status


async def test_a_post_without_the_secret_is_refused_and_admits_nothing(
    webhook: WebhookGateway, queue: Queue
) -> None:
    assert await post(webhook.url, an_update(1), {}) == 401
    assert await post(webhook.url, an_update(2), {SECRET_HEADER: "wrong"}) == 401
    assert await post(webhook.url, an_update(3), {SECRET_HEADER: SECRET + "x"}) == 401
    assert await post(webhook.url, an_update(4), {SECRET_HEADER: ""}) == 401
    assert webhook.refused == 4
    assert (await queue.counts()).pending == 0


async def test_a_post_with_the_secret_is_admitted_once(
    webhook: WebhookGateway, queue: Queue
) -> None:
    headers = {SECRET_HEADER: SECRET}
    assert await post(webhook.url, an_update(10), headers) == 200
    assert await post(webhook.url, an_update(10), headers) == 200  # Telegram retrying
    assert (webhook.enqueued, webhook.duplicate) == (1, 1)
    assert [info.depth for info in await queue.lanes([str(ADA)])] == [1]


async def test_a_body_that_is_not_an_update_is_dropped_with_200(
    webhook: WebhookGateway, queue: Queue
) -> None:
    headers = {SECRET_HEADER: SECRET}
    assert await post(webhook.url, ["not", "an", "update"], headers) == 200
    async with (
        aiohttp.ClientSession() as session,
        session.post(webhook.url, data=b"{not json", headers=headers) as response,
    ):
        assert response.status == 200
    assert webhook.dropped == 2
    assert (await queue.counts()).pending == 0


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the parser goes
        b'{"update_id": 5, "message": ' + b"[" * 100_000,
        b'{"update_id": 5, "message": {"text": "\xff"}}',  # not UTF-8
        b"{not json",
    ],
)
async def test_a_body_too_deep_or_malformed_is_dropped_with_200_and_one_warning(
    webhook: WebhookGateway, queue: Queue, caplog: pytest.LogCaptureFixture, body: bytes
) -> None:
    headers = {SECRET_HEADER: SECRET}
    with caplog.at_level(logging.WARNING, logger="codemojex.gateway"):
        async with (
            aiohttp.ClientSession() as session,
            session.post(webhook.url, data=body, headers=headers) as response,
        ):
            assert response.status == 200
            assert await response.json() == {"ok": True}
    assert webhook.dropped == 1
    assert (await queue.counts()).pending == 0
    [record] = [r for r in caplog.records if r.name == "codemojex.gateway"]
    assert record.getMessage().startswith("webhook: dropped a body that is not JSON")
    assert record.exc_info is None  # one line, no traceback
    assert SECRET not in caplog.text


async def test_the_bot_api_delivers_through_the_webhook(
    sandbox: Sandbox, webhook: WebhookGateway, queue: Queue
) -> None:
    sandbox.say(ADA, "/help")
    deadline = time.monotonic() + 10.0
    while (await queue.counts()).pending == 0:  # the sandbox posts on its own schedule
        assert time.monotonic() < deadline, "the sandbox never posted the update"
        await asyncio.sleep(0.02)
    job = await queue.claim()
    assert isinstance(job, Job)
    assert job.lane == str(ADA)
    assert job.payload["task"] == "command"
    assert job.payload["args"]["update"]["message"]["text"] == "/help"


async def test_the_bot_runs_in_webhook_mode(
    sandbox: Sandbox, valkey_url: str, queue_name: str, tmp_path: Path
) -> None:
    prefix = f"{queue_name}."
    settings = dataclasses.replace(
        settings_for(sandbox, valkey_url, prefix, tmp_path), mode="webhook"
    )
    ready: list[str] = []
    try:
        async with running(settings, lambda component, detail: ready.append(component)) as bot:
            assert isinstance(bot.gateway, WebhookGateway)
            sandbox.say(ADA, "/start")
            await wait_for_text(sandbox, ADA, "Welcome to Codemojex, Ada!")
        assert ready[-1] == "gateway"
        assert "command worker" in ready
        # Stopping deleted the webhook: polling works again.
        bot_api = open_bot(TelegramConfig(sandbox.options.bot_token, base=sandbox.url))
        try:
            assert (await bot_api.get_webhook_info()).url == ""
        finally:
            await bot_api.session.close()
    finally:
        await forget(valkey_url, prefix)

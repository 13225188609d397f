"""Fixtures for tests against the sandbox Bot API server: ``sandbox`` (a started Sandbox with a
random control token and Telegram's default limits), ``sandbox_bot`` (an aiogram Bot on it) and
``command`` (the bot stage's task on the test's queue, for the gateways)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from aiogram import Bot

from codemojex.bot.tasks import CommandTask, register
from codemojex.telegram import TelegramConfig, open_bot
from codemojex.telegram.sandbox import Sandbox, SandboxOptions
from echomq import App, Queue


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(SandboxOptions(control_token=secrets.token_urlsafe(16))) as started:
        yield started


@pytest.fixture
async def sandbox_bot(sandbox: Sandbox) -> AsyncIterator[Bot]:
    bot = open_bot(TelegramConfig(sandbox.options.bot_token, base=sandbox.url))
    yield bot
    await bot.session.close()


@pytest.fixture
async def command(queue: Queue) -> AsyncIterator[CommandTask]:
    """The ``command`` task on the test's own queue (its app borrows the queue's wire)."""
    app = App(queue=queue.name, wire=queue.wire, result_ttl=0)
    yield register(app, queue.name)
    await app.close()

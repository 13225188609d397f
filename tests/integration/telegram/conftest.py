"""Fixtures for tests against the sandbox Bot API server: ``sandbox`` (a started Sandbox with a
random control token and Telegram's default limits) and ``sandbox_bot`` (an aiogram Bot on it)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from aiogram import Bot

from codemojex.telegram import TelegramConfig, open_bot
from codemojex.telegram.sandbox import Sandbox, SandboxOptions


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(SandboxOptions(control_token=secrets.token_urlsafe(16))) as started:
        yield started


@pytest.fixture
async def sandbox_bot(sandbox: Sandbox) -> AsyncIterator[Bot]:
    bot = open_bot(TelegramConfig(sandbox.options.bot_token, base=sandbox.url))
    yield bot
    await bot.session.close()

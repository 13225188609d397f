"""The Bot API transport: one aiogram ``Bot`` talking to Telegram or to the sandbox.

The same code serves both: only the API base differs. The token comes from the application's
environment (never from library code) and never appears in a repr or a log line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import PRODUCTION, TelegramAPIServer

TELEGRAM_API_BASE = "https://api.telegram.org"
"""Telegram's own Bot API; the sandbox serves the same paths under its own base URL."""


@dataclass(frozen=True, slots=True)
class TelegramConfig:
    """Where the bot talks: ``token`` (secret, hidden from repr) and the API ``base`` URL.

    ``timeout`` bounds each request in seconds (a long poll adds its own ``timeout`` on top).
    """

    token: str = field(repr=False)
    base: str = TELEGRAM_API_BASE
    timeout: float = 30.0

    @property
    def is_telegram(self) -> bool:
        """True when this talks to the real Telegram rather than a sandbox."""
        return self.base.rstrip("/") == TELEGRAM_API_BASE


def open_bot(config: TelegramConfig) -> Bot:
    """A ``Bot`` on ``config``; close it with ``await bot.session.close()``."""
    api = PRODUCTION if config.is_telegram else TelegramAPIServer.from_base(config.base.rstrip("/"))
    session = AiohttpSession(api=api, timeout=config.timeout)
    return Bot(config.token, session=session)


def redact(text: str, token: str) -> str:
    """``text`` with the bot token (and its secret half) cut out: error texts may quote a URL,
    or only the part after the colon. The one redaction of the delivery and the gateway."""
    for secret in (token, token.partition(":")[2]):
        if secret:
            text = text.replace(secret, "<token>")
    return text

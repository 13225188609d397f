"""Telegram, the edge: the Bot API transport (one aiogram ``Bot`` for Telegram or the sandbox,
and the token's redaction) and the sandbox Bot API server with its browser chat page. It
imports no stage; the stages reach Telegram through :mod:`codemojex.telegram.transport`."""

from codemojex.telegram.transport import TELEGRAM_API_BASE, TelegramConfig, open_bot, redact

__all__ = ["TELEGRAM_API_BASE", "TelegramConfig", "open_bot", "redact"]

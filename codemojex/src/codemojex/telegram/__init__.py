"""Telegram: the Bot API transport, the gateway (polling or webhook), delivery of notifications,
and the sandbox Bot API server with its browser chat page."""

from codemojex.telegram.transport import TELEGRAM_API_BASE, TelegramConfig, open_bot

__all__ = ["TELEGRAM_API_BASE", "TelegramConfig", "open_bot"]

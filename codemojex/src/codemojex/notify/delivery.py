"""Delivery of one notification through the Bot API, and what its outcome means.

:func:`deliver` sends (or edits) one message and never raises for a Telegram answer: it returns
a verdict the notification worker acts on — delivered, transient (try again), permanent (drop)
or a bad token (stop). :func:`classify` is the pure mapping from aiogram's errors to verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from aiogram import Bot
from aiogram.exceptions import (
    AiogramError,
    ClientDecodeError,
    TelegramBadRequest,
    TelegramEntityTooLarge,
    TelegramForbiddenError,
    TelegramMigrateToChat,
    TelegramNetworkError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.types import InlineKeyboardMarkup, Message, ReplyParameters

from codemojex.notify.api import Notification
from codemojex.telegram.transport import redact

#: The Bot API's answer to an edit that changes nothing: the text is already there.
NOT_MODIFIED = "message is not modified"
#: Longest reason kept (an HTML error page can be long; the dead letter keeps the reason).
REASON_LIMIT = 300


@dataclass(frozen=True, slots=True)
class Delivered:
    """Telegram has the message: ``message_id`` is the sent (or edited) message."""

    message_id: int


@dataclass(frozen=True, slots=True)
class Transient:
    """Try again later: a 429 (``retry_after`` seconds, to be honoured exactly), a 5xx, an HTML
    error page, a network error or a timeout (``retry_after`` None: back off)."""

    retry_after: float | None
    reason: str


@dataclass(frozen=True, slots=True)
class Permanent:
    """Never deliverable as it is (400, 403): drop it. ``blocked``: the chat refuses the bot."""

    reason: str
    blocked: bool = False


@dataclass(frozen=True, slots=True)
class BadToken:
    """401 or 404 on the bot itself: the token is wrong or revoked; nothing can be sent."""

    reason: str


Outcome = Delivered | Transient | Permanent | BadToken


def classify(exc: BaseException, *, secret: str = "") -> Outcome:
    """The verdict for an error raised by a Bot API call; ``secret`` (the token) is redacted
    from the reason wherever an error's text echoes a URL."""
    reason = _reason(exc, secret)
    if isinstance(exc, TelegramRetryAfter):
        return Transient(float(exc.retry_after), reason)
    if isinstance(exc, TelegramUnauthorizedError | TelegramNotFound):
        return BadToken(reason)
    if isinstance(exc, TelegramForbiddenError):
        return Permanent(reason, blocked=True)
    if isinstance(exc, TelegramBadRequest | TelegramMigrateToChat | TelegramEntityTooLarge):
        return Permanent(reason)
    # Before the catch-alls: TelegramEntityTooLarge (413) is a TelegramNetworkError subclass.
    if isinstance(exc, TelegramServerError | TelegramNetworkError | ClientDecodeError):
        return Transient(None, reason)  # ClientDecodeError: a body that is not JSON (HTML 502)
    if isinstance(exc, TimeoutError | aiohttp.ClientError | OSError):
        return Transient(None, reason)
    # Anything else Telegram answers (an unlisted status) is retried with backoff and ends in
    # the dead letters with its reason after the last attempt: visible, never silently lost.
    return Transient(None, reason)


async def deliver(bot: Bot, notification: Notification) -> Outcome:
    """Send ``notification`` (or edit the message it names) and say how it went."""
    markup = None
    if notification.markup is not None:
        try:
            markup = InlineKeyboardMarkup.model_validate(notification.markup)
        except ValueError as exc:  # pydantic's ValidationError: Telegram would answer 400 too
            return Permanent(f"reply markup is not an inline keyboard: {_first_line(exc)}")
    try:
        if notification.edit is None:
            reply = None
            if notification.reply_to is not None:
                # Without the message (deleted since), Telegram sends it as a plain message.
                reply = ReplyParameters(
                    message_id=notification.reply_to, allow_sending_without_reply=True
                )
            sent = await bot.send_message(
                notification.chat,
                notification.text,
                parse_mode=None,
                reply_markup=markup,
                reply_parameters=reply,
            )
            return Delivered(sent.message_id)
        edited = await bot.edit_message_text(
            notification.text,
            chat_id=notification.chat,
            message_id=notification.edit,
            parse_mode=None,
            reply_markup=markup,
        )
        return Delivered(edited.message_id if isinstance(edited, Message) else notification.edit)
    except TelegramBadRequest as exc:
        if notification.edit is not None and NOT_MODIFIED in exc.message:
            return Delivered(notification.edit)  # the text is already what we wanted
        return classify(exc, secret=bot.token)
    except (TimeoutError, AiogramError, aiohttp.ClientError, OSError) as exc:
        return classify(exc, secret=bot.token)


def _reason(exc: BaseException, secret: str) -> str:
    if isinstance(exc, ClientDecodeError):
        text = f"{exc.message}: {type(exc.original).__name__} (a body that is not JSON)"
    else:
        text = str(exc).split("\n(background on this error", 1)[0]
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return redact(text, secret)[:REASON_LIMIT]


def _first_line(exc: BaseException) -> str:
    return str(exc).split("\n", 1)[0][:REASON_LIMIT]

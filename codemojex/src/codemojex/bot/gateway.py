"""The long-polling gateway: ``getUpdates`` in a loop, each batch admitted onto
``cm.bot.commands`` in one ``enqueue_many`` before its offset is confirmed.

The offset advances only after the batch is on the bus, so a crash or a bus failure between
the two makes Telegram deliver the batch again, and the dedup key by ``update_id`` admits it
once. Network errors and 5xx back off and retry; a bad token (401/404) and an active webhook
(409) stop the gateway with a :class:`GatewayError` that says what to do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from aiogram import Bot
from aiogram.exceptions import (
    ClientDecodeError,
    TelegramAPIError,
    TelegramConflictError,
    TelegramNetworkError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.methods.base import TelegramMethod

from codemojex.bot.api import AdmissionError, admit
from codemojex.domain import CodemojexError
from codemojex.telegram.transport import redact
from echomq import EchoMQError, Task

log = logging.getLogger("codemojex.gateway")

ALLOWED_UPDATES: tuple[str, ...] = ("message", "callback_query")
"""The update kinds the command worker handles; Telegram sends only these (an edited message
is not a second guess)."""


class GatewayError(CodemojexError):
    """The gateway cannot run: ``reason`` is ``bad_token`` or ``webhook_active``."""


class UnconfirmedBatch(CodemojexError):
    """A batch held only malformed updates: nothing in it can be confirmed by offset."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} malformed update(s) without an id", reason="unconfirmed")


class RawUpdates(TelegramMethod[list[Any]]):
    """``getUpdates`` answering the updates as plain JSON, so one malformed update cannot make
    the whole batch unreadable (aiogram's own ``GetUpdates`` validates every update)."""

    __returning__: ClassVar[Any] = list[Any]
    __api_method__: ClassVar[str] = "getUpdates"

    offset: int | None = None
    limit: int | None = None
    timeout: int | None = None
    allowed_updates: list[str] | None = None


@dataclass(frozen=True, slots=True)
class PollingOptions:
    """How the gateway polls: ``timeout`` is the long poll in whole seconds, ``limit`` the most
    updates per batch (1..100), ``backoff``/``max_backoff`` the seconds between failed tries."""

    timeout: int = 25
    limit: int = 100
    backoff: float = 0.5
    max_backoff: float = 30.0
    allowed_updates: tuple[str, ...] = ALLOWED_UPDATES

    def __post_init__(self) -> None:
        if self.timeout < 0 or not 1 <= self.limit <= 100:
            raise ValueError("timeout is whole seconds >= 0 and limit is 1..100")
        if not 0 < self.backoff <= self.max_backoff:
            raise ValueError("backoff is seconds > 0, at most max_backoff")


def fatal(error: TelegramAPIError, token: str) -> GatewayError | None:
    """The :class:`GatewayError` for an answer that no retry can fix, else ``None``."""
    if isinstance(error, TelegramUnauthorizedError | TelegramNotFound):
        return GatewayError(
            "the Bot API refused the bot token (401/404): check TELEGRAM_BOT_TOKEN "
            f"({redact(error.message, token)})",
            reason="bad_token",
        )
    if isinstance(error, TelegramConflictError):
        return GatewayError(
            "getUpdates conflicts with the bot's webhook (409): a webhook is active; run in "
            "webhook mode, or delete the webhook (deleteWebhook) to poll "
            f"({redact(error.message, token)})",
            reason="webhook_active",
        )
    return None


class Poller:
    """Long-polls ``bot`` and admits every batch as ``command`` tasks (``cm.bot.commands``).

    ``on_ready`` is called once, after the first successful ``getUpdates`` (a short poll, so a
    bad token or an active webhook shows at once). Stats count what
    went through (``enqueued``, ``duplicate``, ``dropped``, ``failures``).
    """

    def __init__(
        self,
        bot: Bot,
        command: Task[..., Any],
        options: PollingOptions | None = None,
        *,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.bot = bot
        self.command = command
        self.options = options or PollingOptions()
        self.on_ready = on_ready
        self.offset: int | None = None
        self.enqueued = 0
        self.duplicate = 0
        self.dropped = 0
        self.failures = 0

    async def poll_once(self, timeout: int | None = None) -> int:
        """One ``getUpdates`` and its admission; returns how many updates came.

        Raises the Bot API's or the bus's error; the offset is unchanged unless the batch was
        admitted whole.
        """
        wait = self.options.timeout if timeout is None else timeout
        updates = await self.bot(
            RawUpdates(
                offset=self.offset,
                limit=self.options.limit,
                timeout=wait,
                allowed_updates=list(self.options.allowed_updates),
            ),
            request_timeout=wait + 10,
        )
        if not updates:
            return 0
        admitted = await admit(self.command, updates)
        self.enqueued += admitted.enqueued
        self.duplicate += admitted.duplicate
        self.dropped += admitted.dropped
        if admitted.next_offset is None:
            # Only malformed updates, none with an id to confirm: the next well-formed update's
            # offset confirms them. Until one comes, poll again after a pause, not in a spin.
            raise UnconfirmedBatch(len(updates))
        self.offset = admitted.next_offset
        return len(updates)

    async def run(self) -> None:
        """Poll until cancelled; raises :class:`GatewayError` when the token or mode is wrong."""
        delay = self.options.backoff
        is_ready = False
        while True:
            try:
                await self.poll_once(None if is_ready else 0)
            except TelegramAPIError as error:
                stop = fatal(error, self.bot.token)
                if stop is not None:
                    raise stop from None
                wait = self._wait_after(error, delay)
            except ClientDecodeError as error:
                # An answer that is not the Bot API's JSON (a proxy's HTML page): transient.
                wait = delay
                log.warning("getUpdates answered something unreadable: %s", type(error).__name__)
            except (AdmissionError, EchoMQError) as error:
                wait = delay
                log.warning("the bus did not take a batch (it is polled again): %s", error)
            except UnconfirmedBatch as error:
                wait = delay
                log.info("%s: waiting %.1fs for an update that confirms them", error, delay)
            else:
                delay = self.options.backoff
                if not is_ready:
                    is_ready = True
                    if self.on_ready is not None:
                        self.on_ready()
                continue
            self.failures += 1
            await asyncio.sleep(wait)
            delay = min(delay * 2, self.options.max_backoff)

    def _wait_after(self, error: TelegramAPIError, delay: float) -> float:
        if isinstance(error, TelegramRetryAfter):
            log.warning("getUpdates: too many requests, retrying after %ss", error.retry_after)
            return float(error.retry_after)
        kind = "network" if isinstance(error, TelegramNetworkError) else "server"
        if not isinstance(error, TelegramNetworkError | TelegramServerError):
            kind = "unexpected"
        log.warning(
            "getUpdates failed (%s error, retrying in %.1fs): %s",
            kind,
            delay,
            redact(error.message, self.bot.token),
        )
        return delay

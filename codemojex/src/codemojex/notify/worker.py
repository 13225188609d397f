"""The notification worker, the handler of ``cm.notify``, in three layers: fairness
(:mod:`~codemojex.notify.fairness`: a lane per chat, so one chat's burst cannot starve the
others), rate (:mod:`~codemojex.notify.rate`: one atomic take of the engine's token buckets
before each send; over budget the notification is deferred, never dropped) and delivery
(:mod:`~codemojex.notify.delivery`: success completes; a 429 cools the chat's lane for its
``retry_after``, no attempt spent; other transient failures back off; permanent ones drop; a bad
token stops).

At most one delivery per ``NOT`` id on our side: a delivered id is recorded (for a day: it only
has to outlive a crash between the send and the complete, see ``keep_delivered``) and checked
before each send. The window left open is a crash (or a lost connection)
between Telegram's answer and the record: that notification is sent again once its lease is
reaped. Closing it would need Telegram to deduplicate, which the Bot API cannot.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable
from typing import Any, Final

import aiohttp
from aiogram import Bot
from aiogram.exceptions import AiogramError

from codemojex.keyspace import NotifyKeys
from codemojex.notify.api import Held, Notification, Notifier, is_kept
from codemojex.notify.blocklist import Blocklist
from codemojex.notify.delivery import BadToken, Delivered, Permanent, Transient, classify, deliver
from codemojex.notify.fairness import ChatTurns
from codemojex.notify.policy import BadTokenError, NotifyCounts, NotifyOptions
from codemojex.notify.rate import Rate
from codemojex.notify.records import Records
from codemojex.notify.status import StatusBoard, StatusView
from codemojex.store.kv import Valkey
from echomq import Cool, Defer, Drop, Job, Queue, Retry

log = logging.getLogger("codemojex.notify")

TOLD_KEEP: Final = 24 * 3600.0
"""Seconds a group, once told how a player starts the bot, is not told again about them."""

START_PAYLOAD: Final = "scores"
"""The deep link's ``start`` parameter (``/start scores``): the bot greets as for ``/start``."""


def start_link(username: str) -> str:
    """The deep link that opens the bot's private chat with its Start button."""
    return f"https://t.me/{username}?start={START_PAYLOAD}"


def start_hint(name: str, link: str) -> str:
    """What a group reads when one of its players never started the bot."""
    who = name or "A player"
    return (
        f"📬 {who}, I can't message you privately until you start me: open {link} and tap "
        "Start. Your scores are kept and sent to you then."
    )


class NotifyWorker:
    """The body of the ``notify`` task: ``await worker.send(body, job)`` sends one
    notification or says why not through echomq's signals (``Defer``: over budget; ``Cool``:
    a 429, the chat's whole lane waits; ``Retry``: transient; ``Drop``: malformed). Run it
    with :class:`NotificationConsumer`, which honours its ``attempts``. Its keys are the
    :class:`~codemojex.keyspace.NotifyKeys` of ``queue``."""

    def __init__(
        self,
        bot: Bot,
        queue: Queue,
        options: NotifyOptions | None = None,
        *,
        rng: random.Random | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self.bot = bot
        #: Tells a group how a player who never started the bot starts it (None: nobody).
        self.notifier = notifier
        self.queue = queue
        self.options = options or NotifyOptions()
        kv = Valkey(queue.wire)
        self.rate = Rate(queue, self.options.limits, self.options.hold)
        keys = NotifyKeys(queue.name)
        self.blocklist = Blocklist(kv, keys)
        self.held = Held(kv, keys)
        self.kv = kv
        self.keys = keys
        self.records = Records(kv, keys, self.options.keep_delivered)
        self.statuses = StatusBoard(kv, keys)
        self.rng = rng or random.Random()
        self.fault: BadTokenError | None = None
        #: Called once with the error when the token turns out bad (the consumer stops).
        self.on_fault: Callable[[BadTokenError], None] | None = None
        self.turns = ChatTurns()
        self._tally = dict.fromkeys((f.name for f in dataclasses.fields(NotifyCounts)), 0)

    @property
    def counts(self) -> NotifyCounts:
        return NotifyCounts(**self._tally)

    def _count(self, name: str, n: int = 1) -> None:
        self._tally[name] += n

    async def send(self, body: dict[str, Any], job: Job) -> None:
        """Send the notification ``body`` holds (its fields, as :meth:`Notification.payload`
        gives them) for the job ``job``."""
        try:
            notification = Notification.from_payload(body)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._count("dead")
            raise Drop(f"malformed notification payload: {type(exc).__name__}: {exc}") from None
        if self.fault is not None:
            raise Defer(self.options.bad_token_delay, "the bot token is bad")
        async with self.turns.turn(notification.chat):
            await self._send(job, notification)

    async def _send(self, job: Job, notification: Notification) -> None:
        if await self._settled_before(notification):
            return
        view: StatusView | None = None
        if notification.status is not None:
            # Before the budget: an update already on screen costs no token.
            view = await self.statuses.read(notification.status)
            if view.shown >= notification.version and not view.is_scrolled_away:
                self._count("coalesced")
                return
        wait = await self.rate.pay(notification.chat)
        if wait is not None:
            self._count("deferred")
            raise Defer(wait, "over the send budget")
        sending = notification
        if view is not None:
            text = view.render(notification.text)
            if view.message is None or view.is_scrolled_away:
                # Sent anew at the bottom, answering the newest guess (see notify.status).
                reply_to = view.bottom if view.bottom is not None else notification.reply_to
                sending = dataclasses.replace(notification, text=text, edit=None, reply_to=reply_to)
            else:
                sending = dataclasses.replace(notification, text=text, edit=view.message)
        outcome = await deliver(self.bot, sending)
        if isinstance(outcome, Delivered):
            await self.records.delivered(notification.id, outcome.message_id)
            if view is not None and notification.status is not None:
                await self.statuses.shown(notification.status, view.version, outcome.message_id)
            self._count("delivered")
        elif isinstance(outcome, Permanent) and view is not None and sending.edit is not None:
            # The status message is gone (deleted, too old to edit): send a new one next run.
            assert notification.status is not None
            await self.statuses.lost(notification.status)
            raise Defer(0.0, f"status message lost: {outcome.reason}")
        elif isinstance(outcome, Permanent):
            await self._drop(notification, outcome)
        elif isinstance(outcome, Transient):
            raise await self._again(job, notification, outcome)
        else:
            self._stop(outcome)
            raise Defer(self.options.bad_token_delay, "the bot token is bad")

    async def _settled_before(self, notification: Notification) -> bool:
        """Already delivered (a redelivery) or for a blocked chat: complete without a send."""
        before = await self.records.before(notification.id, notification.chat)
        if before.delivered:
            self._count("duplicates")
            return True
        if before.blocked and is_kept(notification):
            self._count("held")
            await self.held.keep(notification)
            return True
        if before.blocked:
            self._count("dropped")
            log.info(
                "notification %s dropped: chat %s blocked the bot",
                notification.id,
                notification.chat,
            )
            return True
        return False

    async def _drop(self, notification: Notification, outcome: Permanent) -> None:
        if outcome.blocked and notification.chat > 0 and is_kept(notification):
            # A private chat that refuses the bot (403: never started it, or blocked it):
            # a group result waits for it, never retried meanwhile, and its group is told.
            self._count("held")
            await self.held.keep(notification)
            if await self.blocklist.mark(notification.chat):
                self._count("blocked")
            await self._tell_origin(notification)
            return
        self._count("dropped")
        if outcome.blocked and await self.blocklist.mark(notification.chat):
            self._count("blocked")
        log.warning(
            "notification %s to chat %s dropped: %s",
            notification.id,
            notification.chat,
            outcome.reason,
        )

    async def _tell_origin(self, notification: Notification) -> None:
        """Tell the group a private result came from, once a day per player, how the player
        starts the bot (Telegram lets a bot write only to users who started it)."""
        group = notification.origin
        if self.notifier is None or group is None:
            return
        told = self.keys.told(notification.chat, group)
        if await self.kv.claim(told, notification.id, TOLD_KEEP) is not None:
            return
        me = await self.bot.me()
        link = start_link(me.username or "")
        await self.notifier.notify(group, start_hint(notification.name, link))

    async def _again(
        self, job: Job, notification: Notification, outcome: Transient
    ) -> Retry | Cool:
        """The signal for a transient failure. A 429: ``Cool`` for exactly ``retry_after``
        (never shortened by the cap): the flood control holds for the chat, not only the
        message that got it, so the chat's whole lane leaves the ring until then, on every
        worker, and this notification goes back at its place, no attempt spent. Else ``Retry``
        after the capped backoff with jitter."""
        if outcome.retry_after is not None:
            self._count("too_many_requests")
            return Cool(max(outcome.retry_after, 0.001), outcome.reason)
        failures = await self._failures(job)
        delay = self.options.backoff(failures, self.rng.random())
        if failures >= self.options.attempts:
            self._count("dead")
            log.warning(
                "notification %s to chat %s is dead after %d attempts: %s",
                notification.id,
                notification.chat,
                failures,
                outcome.reason,
            )
        else:
            self._count("retried")
        return Retry(delay, outcome.reason)

    async def _failures(self, job: Job) -> int:
        """Failed attempts so far, this one included (deferrals are not failures): the engine's
        own count, the one its ``max_attempts`` rule reads."""
        info = await self.queue.job(job.id)
        return info.failures if info is not None else job.attempts

    async def check_token(self) -> None:
        """Ask ``getMe``: raise :class:`BadTokenError` when the token is refused. Any other
        failure (Telegram unreachable) is logged: sends will retry on their own."""
        try:
            await self.bot.get_me()
        except (TimeoutError, AiogramError, aiohttp.ClientError, OSError) as exc:
            outcome = classify(exc, secret=self.bot.token)
            if isinstance(outcome, BadToken):
                self._stop(outcome)
                assert self.fault is not None
                raise self.fault from None
            log.warning("getMe failed, sending anyway: %s", getattr(outcome, "reason", outcome))

    def _stop(self, outcome: BadToken) -> None:
        if self.fault is not None:
            return
        self.fault = BadTokenError(outcome.reason)
        log.error("%s", self.fault)
        if self.on_fault is not None:
            self.on_fault(self.fault)

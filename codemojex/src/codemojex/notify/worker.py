"""The notification worker, the handler of ``cm.notify``, in three layers: fairness (a lane per
chat, so one chat's burst cannot starve the others), rate (one atomic take of the engine's token
buckets before each send; over budget the notification is deferred, never dropped) and delivery
(success completes; transient failures back off; permanent ones drop; a bad token stops).

At most one delivery per ``NOT`` id on our side: a delivered id is recorded (for a day: it only
has to outlive a crash between the send and the complete, see ``keep_delivered``) and checked
before each send. The window left open is a crash (or a lost connection)
between Telegram's answer and the record: that notification is sent again once its lease is
reaped. Closing it would need Telegram to deduplicate, which the Bot API cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
from collections.abc import AsyncIterator, Callable

import aiohttp
from aiogram import Bot
from aiogram.exceptions import AiogramError

from codemojex.services.notifier import Blocklist, Notification, notify_key
from codemojex.telegram.delivery import (
    BadToken,
    Delivered,
    Permanent,
    Transient,
    classify,
    deliver,
)
from codemojex.workers.notify_policy import (
    BadTokenError,
    NotifyCounts,
    NotifyOptions,
    RecentChats,
)
from echomq import (
    Buckets,
    Consumer,
    ConsumerOptions,
    Defer,
    Drop,
    Job,
    Queue,
    Retry,
    Taken,
    Tally,
    Wire,
)

log = logging.getLogger("codemojex.notify")


class SentLog:
    """The ``NOT`` ids delivered lately, one key each under the notify queue's hash tag."""

    def __init__(self, wire: Wire, queue: str, keep: float) -> None:
        self.wire = wire
        self.queue = queue
        self.keep_ms = max(1, int(keep * 1000))

    def key(self, notification: str) -> str:
        return notify_key(self.queue, "sent:" + notification)

    async def record(self, notification: str, message_id: int) -> None:
        await self.wire.call("SET", self.key(notification), message_id, "PX", self.keep_ms)


class NotifyWorker:
    """The handler of ``cm.notify``: ``await worker(job)`` sends one notification or says why
    not through the consumer's signals (``Defer``: over budget; ``Retry``: transient; ``Drop``:
    malformed). Run it with :class:`NotificationConsumer`, which honours its ``attempts``."""

    def __init__(
        self,
        bot: Bot,
        queue: Queue,
        options: NotifyOptions | None = None,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self.bot = bot
        self.queue = queue
        self.options = options or NotifyOptions()
        self.buckets = Buckets(queue.wire, queue.name)
        self.blocklist = Blocklist(queue.wire, queue.name)
        self.sent = SentLog(queue.wire, queue.name, self.options.keep_delivered)
        self.rng = rng or random.Random()
        self.fault: BadTokenError | None = None
        #: Called once with the error when the token turns out bad (the consumer stops).
        self.on_fault: Callable[[BadTokenError], None] | None = None
        self._turns: dict[int, tuple[asyncio.Lock, list[int]]] = {}
        self._paced = RecentChats()
        self._tally = dict.fromkeys((f.name for f in dataclasses.fields(NotifyCounts)), 0)

    @property
    def counts(self) -> NotifyCounts:
        return NotifyCounts(**self._tally)

    def _count(self, name: str, n: int = 1) -> None:
        self._tally[name] += n

    async def __call__(self, job: Job) -> None:
        try:
            notification = Notification.from_payload(job.payload)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._count("dead")
            raise Drop(f"malformed notification payload: {type(exc).__name__}: {exc}") from None
        if self.fault is not None:
            raise Defer(self.options.bad_token_delay, "the bot token is bad")
        async with self._turn(notification.chat):
            await self._send(job, notification)

    @contextlib.asynccontextmanager
    async def _turn(self, chat: int) -> AsyncIterator[None]:
        """One send at a time per chat in this process, in claim order (``asyncio.Lock`` is
        first come, first served): a claimed batch of one lane goes out in lane order, and the
        second job of a chat that just answered 403 sees the chat blocked instead of sending."""
        entry = self._turns.setdefault(chat, (asyncio.Lock(), [0]))
        entry[1][0] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1][0] -= 1
            if not entry[1][0]:
                del self._turns[chat]

    async def _send(self, job: Job, notification: Notification) -> None:
        if await self._settled_before(notification):
            return
        wait = await self._take(notification.chat)
        if wait is not None:
            # Paced only when the chat's (or group's) own budget refused: a wait the global
            # bucket caused says nothing of this chat's pace.
            if self.options.limits.own_budget_spent(wait):
                await self._pace(notification.chat)
            self._count("deferred")
            raise Defer(wait, "over the send budget")
        outcome = await deliver(self.bot, notification)
        if isinstance(outcome, Delivered):
            await self.sent.record(notification.id, outcome.message_id)
            self._count("delivered")
        elif isinstance(outcome, Permanent):
            await self._drop(notification, outcome)
        elif isinstance(outcome, Transient):
            raise await self._again(job, notification, outcome)
        else:
            self._stop(outcome)
            raise Defer(self.options.bad_token_delay, "the bot token is bad")

    async def _settled_before(self, notification: Notification) -> bool:
        """Already delivered (a redelivery) or for a blocked chat: complete without a send.
        A chat still inside a 429's ``retry_after`` defers the notification until it ends."""
        sent, blocked, cooling_ms = await self.queue.wire.call_many(
            [
                ("EXISTS", self.sent.key(notification.id)),
                ("SISMEMBER", self.blocklist.key, notification.chat),
                ("PTTL", self._cooling_key(notification.chat)),
            ]
        )
        if cooling_ms > 0:
            # A 429's retry_after holds for the chat, not only the message that got it.
            self._count("deferred")
            raise Defer(cooling_ms / 1000, "the chat is under flood control")
        if sent:
            self._count("duplicates")
            return True
        if blocked:
            self._count("dropped")
            log.info(
                "notification %s dropped: chat %s blocked the bot",
                notification.id,
                notification.chat,
            )
            return True
        return False

    def _cooling_key(self, chat: int) -> str:
        return notify_key(self.queue.name, f"cooling:{chat}")

    async def _take(self, chat: int) -> float | None:
        """Pay every budget of a send to ``chat`` in one take; None when paid, else the wait
        after which to try again. Short waits (within ``hold`` in total) are waited in hand."""
        buckets = self.options.limits.buckets(chat)
        held = 0.0
        while True:
            taken = await self.buckets.take(buckets)
            if isinstance(taken, Taken):
                return None
            if held + taken.wait > self.options.hold:
                return taken.wait
            held += taken.wait
            await asyncio.sleep(taken.wait)

    async def _pace(self, chat: int) -> None:
        """Give a chat that outran its budget a lane rate of the same pace (once per process
        while the chat is among the last few thousand paced: :class:`RecentChats`).

        Without it a deep lane (one chat × 500) is claimed head after head, each deferred for
        the same second: the whole backlog cycles through the schedule every second. With it
        the engine benches the lane between windows and claims only what the budget can send;
        the buckets still decide every send. The lane rate stays once set (the chat's pace
        never changes, and an empty lane costs nothing), so no one removes it.
        """
        if not self._paced.add(chat):
            return
        # The chat's pace, groups included: pacing a group at 20/min would hold back the
        # bursts its group bucket still allows; a group that spent that bucket is deferred by
        # it, at most a window's claims at a time.
        limits = self.options.limits
        await self.queue.lane(str(chat)).rate(
            limits.chat_burst, limits.chat_burst / limits.chat_rate
        )

    async def _drop(self, notification: Notification, outcome: Permanent) -> None:
        self._count("dropped")
        if outcome.blocked and await self.blocklist.mark(notification.chat):
            self._count("blocked")
        log.warning(
            "notification %s to chat %s dropped: %s",
            notification.id,
            notification.chat,
            outcome.reason,
        )

    async def _again(self, job: Job, notification: Notification, outcome: Transient) -> Retry:
        """The retry signal for a transient failure: after exactly ``retry_after`` for a 429
        (never shortened by the cap), else the capped backoff with jitter."""
        failures = await self._failures(job)
        if outcome.retry_after is not None:
            self._count("too_many_requests")
            delay = outcome.retry_after
            cooling = self._cooling_key(notification.chat)
            await self.queue.wire.call("SET", cooling, 1, "PX", max(1, int(delay * 1000)))
        else:
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
        """Failed attempts so far, this one included: the claim token less the grace that
        deferrals added (the engine's own rule for ``max_attempts``, see retry.lua)."""
        grace = await self.queue.wire.call("HGET", self.queue.keys.job(job.id), "grace")
        return job.attempts - int(grace or 0)

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


#: How the notification consumer works unless told otherwise: batches as long as a chat's
#: burst (a lane's burst goes in one claim under a backlog); eight sends in hand are plenty for
#: 30/s (more only contend for the global bucket: the flood test measured half the deferrals
#: at 8 as at 16, at the same throughput); a short beat and idle upkeep, because a deferral
#: scheduled while the consumer is parked comes back only at its next upkeep (an idle one
#: costs one tick script); leases far longer than a send.
NOTIFY_CONSUMER = ConsumerOptions(concurrency=8, lease=60.0, batch=3, beat=0.25, idle_upkeep=0.25)


class NotificationConsumer(Consumer):
    """A consumer of ``cm.notify`` running ``worker``: its ``max_attempts`` is the worker's
    ``attempts``; ``run`` checks the token first and raises :class:`BadTokenError` (after
    stopping, with every notification still queued) when the Bot API refuses it."""

    def __init__(
        self,
        worker: NotifyWorker,
        options: ConsumerOptions | None = None,
        *,
        name: str = "notify",
        check_token: bool = True,
    ) -> None:
        options = dataclasses.replace(
            options or NOTIFY_CONSUMER, max_attempts=worker.options.attempts
        )
        super().__init__(worker.queue, worker, options, name=name)
        self.worker = worker
        self.check_token = check_token
        worker.on_fault = self._fault

    def _fault(self, error: BadTokenError) -> None:
        self.stop()

    @property
    def counts(self) -> NotifyCounts:
        """The worker's counters (a snapshot)."""
        return self.worker.counts

    async def run(self) -> Tally:
        if self.check_token:
            await self.worker.check_token()
        tally = await super().run()
        if self.worker.fault is not None:
            raise self.worker.fault
        return tally

"""The flood's notification path: the in-process sandbox Bot API (the plan's players and group
chats added to it) and the real notification worker sending to it through aiogram, with what
both count — the worker's delivered/deferred/retried/dropped, the sandbox's 429s and send times.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from codemojex.flood.scenario import Plan
from codemojex.notify.consumer import NotificationConsumer
from codemojex.pipeline import Pipeline
from codemojex.telegram.sandbox import Sandbox, SandboxOptions
from codemojex.telegram.transport import TelegramConfig, open_bot


@dataclass(frozen=True, slots=True)
class SendCounts:
    """What the notification path did: the worker's ``delivered``, ``deferred`` (over a budget,
    put back, no attempt spent), ``retried`` (transient failures), ``dropped`` (permanent
    failures) and ``dead`` (out of attempts); the sandbox's ``too_many_requests`` (429s it
    answered) and ``sandbox_delivered``; ``pending``: notifications still on ``cm.notify``;
    ``coalesced``: status updates a later send of the same live status message showed."""

    delivered: int = 0
    deferred: int = 0
    retried: int = 0
    dropped: int = 0
    dead: int = 0
    too_many_requests: int = 0
    sandbox_delivered: int = 0
    pending: int = 0
    coalesced: int = 0


class Sending:
    """The sandbox and the notification consumer of one flood run."""

    def __init__(
        self, sandbox: Sandbox, consumer: NotificationConsumer, pipeline: Pipeline, plan: Plan
    ) -> None:
        self.sandbox = sandbox
        self.consumer = consumer
        self.pipeline = pipeline
        self.chats = tuple(room.chat for room in plan.rooms) + plan.private_chats

    def send_times(self) -> tuple[float, ...]:
        """The sandbox's ``time.monotonic()`` of every message delivered to the plan's chats."""
        return tuple(
            sorted(message.at for chat in self.chats for message in self.sandbox.messages(chat))
        )

    async def counts(self) -> SendCounts:
        """The counts so far (``pending`` asks the engine)."""
        worker = self.consumer.counts
        stats = self.sandbox.stats
        queue = await self.pipeline.queues.notify.counts()
        return SendCounts(
            delivered=worker.delivered,
            deferred=worker.deferred,
            retried=worker.retried,
            dropped=worker.dropped,
            dead=worker.dead,
            too_many_requests=stats.too_many_requests,
            sandbox_delivered=stats.delivered,
            pending=queue.pending + queue.scheduled + queue.active,
            coalesced=worker.coalesced,
        )

    def has_delivered(self, chats: Sequence[int]) -> bool:
        """Whether each of ``chats`` has received at least one message."""
        return all(self.sandbox.messages(chat) for chat in chats)


@asynccontextmanager
async def open_sending(plan: Plan, pipeline: Pipeline) -> AsyncIterator[Sending]:
    """A sandbox on a free 127.0.0.1 port knowing the plan's users and groups, and a
    notification consumer (not yet running) of ``pipeline`` sending to it."""
    options = SandboxOptions(control_token=secrets.token_urlsafe(16))
    async with Sandbox(options) as sandbox:
        for room in plan.rooms:
            for member in room.players:
                sandbox.add_user(member.user, member.name)
            for watcher in room.watchers:
                sandbox.add_user(watcher, f"Watcher {watcher}")
            sandbox.add_group(room.chat, room.title, list(room.members))
        bot = open_bot(TelegramConfig(options.bot_token, base=sandbox.url))
        try:
            yield Sending(sandbox, pipeline.notification_consumer(bot), pipeline, plan)
        finally:
            await bot.session.close()

"""The command worker: the handler of ``cm.bot.commands``. Each job is one Telegram update; it is
handled once (a re-delivered update is recognised by its ``update_id``), parsed with aiogram's
types and routed by an aiogram ``Dispatcher`` to one router per feature, with the
:class:`Services` injected. Replies leave through the notifier.

Handled once: before routing, ``SET seen:<update_id> <job id> NX`` records the job that owns the
update (for ``seen_ttl``). A later job for the same update (Telegram or a gateway delivering it
again after the first was completed, when the admission dedup no longer holds) finds another
job's id there and is skipped; a retry of the owning job finds its own id and runs again.

A private chat that sends anything is taken off the notifier's blocklist first: writing to the
bot means the user unblocked it.

Per-chat order: a batch claim leases several updates of one chat at once, and the consumer runs
each as a task; a lock per lane makes them take turns in claim order within this process.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from enum import StrEnum
from typing import Any, Final

from aiogram import Dispatcher
from aiogram.filters import ExceptionTypeFilter
from aiogram.types import ErrorEvent, Update
from pydantic import ValidationError

from codemojex.bot.api import update_chat, update_id_of
from codemojex.bot.context import Services
from codemojex.bot.routers import board, convert, fallback, guess, keyboard, me, play, start
from codemojex.domain import CodemojexError
from echomq import ConsumerOptions, Job

log = logging.getLogger("codemojex.commands")

COMMAND_CONSUMER: Final = ConsumerOptions(concurrency=32, batch=16, lease=30.0, max_attempts=3)
"""Batch claims drain a burst of one chat's updates in one round trip."""


class Handled(StrEnum):
    """What one run of the command worker did with its update."""

    ROUTED = "routed"
    """A router took the update (or none wanted it: the update is consumed either way)."""
    DUPLICATE = "duplicate"
    """Another job already handled this ``update_id``."""
    MALFORMED = "malformed"
    """The payload is not an update; logged and dropped."""


def dispatcher() -> Dispatcher:
    """A dispatcher with every feature's router, the catch-all last.

    A refusal no handler answered itself (a :class:`CodemojexError`) is told to the chat and the
    update is done: retrying cannot change the answer. Any other error propagates, and the
    consumer retries the update (a database busy, the bus away).
    """
    routes = Dispatcher(name="codemojex")
    for feature in (start, play, guess, keyboard, board, me, convert, fallback):
        routes.include_router(feature.router())

    @routes.errors(ExceptionTypeFilter(CodemojexError))
    async def refused(event: ErrorEvent, services: Services) -> None:
        chat = update_chat(event.update.model_dump(mode="json", by_alias=True))
        log.info("update %d refused: %s", event.update.update_id, event.exception)
        if chat is not None:
            await services.reply(chat, f"Sorry, that did not work: {event.exception}")

    return routes


class LaneLocks:
    """One ``asyncio.Lock`` per lane while someone holds or waits for it (FIFO by arrival)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, lane: str) -> AsyncIterator[None]:
        held = self._locks.get(lane)
        lock, users = held if held is not None else (asyncio.Lock(), 0)
        self._locks[lane] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[lane]
            if users == 1:
                del self._locks[lane]
            else:
                self._locks[lane] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)


class CommandWorker:
    """The body of the ``command`` task (a command worker's state holds it,
    :mod:`codemojex.bot.tasks`); one per process, shared by its pool of command workers, so
    the lane locks order a chat's updates across the pool."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.dispatcher = dispatcher()
        self.locks = LaneLocks()

    async def handle(self, update: dict[str, Any], job: Job) -> Handled:
        """Handle the Telegram ``update`` that the job ``job`` carries, once."""
        # The lane's lock first, before any await: tasks start in claim order, so they queue on
        # the lock in that order (a later await, such as a round trip, could reorder them).
        async with self.locks.hold(job.lane):
            return await self._handle(update, job)

    async def _handle(self, payload: dict[str, Any], job: Job) -> Handled:
        update_id = update_id_of(payload)
        if update_id is None:
            log.warning("job %s: dropped a payload that is not an update", job.id)
            return Handled.MALFORMED
        if not await self._claim_update(update_id, job.id):
            log.info("update %d was handled before: skipped (job %s)", update_id, job.id)
            return Handled.DUPLICATE
        bot = self.services.bot
        try:
            update = Update.model_validate(payload, context={"bot": bot})
        except ValidationError as error:
            log.warning(
                "update %d: dropped, not a readable update (%d problems)",
                update_id,
                error.error_count(),
            )
            return Handled.MALFORMED
        await self._unblock(payload)
        # ``command_job``: the key that makes a charge idempotent per update (a guess, a
        # conversion): a retry of this job after a crash finds what it already charged.
        await self.dispatcher.feed_update(bot, update, services=self.services, command_job=job.id)
        return Handled.ROUTED

    async def _unblock(self, payload: dict[str, Any]) -> None:
        """A private chat that sends an update talks to the bot again: off the blocklist, before
        the reply is enqueued (the notifier skips blocked chats). One SREM; groups (negative
        ids) are never on it. A ``my_chat_member`` update saying the user blocked us is not."""
        chat = update_chat(payload)
        if chat is None or chat <= 0:
            return
        member = payload.get("my_chat_member")
        if isinstance(member, dict):
            status = (member.get("new_chat_member") or {}).get("status")
            if status == "kicked":
                return
        if await self.services.notifier.unblock(chat):
            log.info("chat %d talks to the bot again: taken off the blocklist", chat)

    async def _claim_update(self, update_id: int, job_id: str) -> bool:
        services = self.services
        holder = await services.kv.claim(
            services.keys.seen(update_id), job_id, services.options.seen_ttl
        )
        return holder is None or holder == job_id

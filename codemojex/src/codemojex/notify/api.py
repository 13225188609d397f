"""The notifier: a message for a chat becomes a job on that chat's lane of ``cm.notify``, unless
the chat blocked the bot (the blocklist the notification worker keeps, a Valkey set).

No Telegram I/O here: sending (rate limits, retries, Telegram) is the notification worker's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from echomq import Minter, Queue, Verdict, Wire


def notify_key(queue: str, suffix: str) -> str:
    """A key of the notifier's own, ``cmn:{<queue>}:<suffix>``: under the notify queue's hash
    tag, so it shares one cluster slot with the queue's keys and its token buckets."""
    return "cmn:{" + queue + "}:" + suffix


@dataclass(frozen=True, slots=True)
class Skipped:
    """A notification not enqueued: ``reason`` says why (``"chat blocked"``)."""

    chat: int
    reason: str
    kind: Literal["skipped"] = "skipped"

    @property
    def ok(self) -> bool:
        """A skip is a normal outcome, like a duplicate."""
        return True

    def __str__(self) -> str:
        return f"skipped: {self.reason}"


class Blocklist:
    """The chats that blocked the bot (a 403): a Valkey set under the notify queue's tag.

    The worker marks a chat at its first 403; the notifier stops enqueueing for it; a chat that
    talks to the bot again (the command worker sees it) can be unmarked.
    """

    def __init__(self, wire: Wire, queue: str) -> None:
        self.wire = wire
        self.key = notify_key(queue, "blocked")

    async def mark(self, chat: int) -> bool:
        """Mark ``chat`` blocked; True when it was not marked before."""
        return bool(await self.wire.call("SADD", self.key, chat))

    async def unmark(self, chat: int) -> bool:
        """The chat accepts messages again; True when it was marked."""
        return bool(await self.wire.call("SREM", self.key, chat))

    async def has(self, chat: int) -> bool:
        return bool(await self.wire.call("SISMEMBER", self.key, chat))

    async def chats(self) -> set[int]:
        return {int(chat) for chat in await self.wire.call("SMEMBERS", self.key)}


@dataclass(frozen=True, slots=True)
class Notification:
    """One message for one chat: ``id`` is its ``NOT`` id, ``chat`` the Telegram chat id.

    ``markup`` is a Bot API ``reply_markup`` object (an inline keyboard); ``edit`` names a message
    of the bot's in ``chat`` whose text (and markup) this notification replaces instead of sending
    a new message.
    """

    id: str
    chat: int
    text: str
    markup: dict[str, Any] | None = None
    edit: int | None = None

    def payload(self) -> dict[str, Any]:
        """The job payload on ``cm.notify`` (optional fields only when set)."""
        body: dict[str, Any] = {"notification": self.id, "chat": self.chat, "text": self.text}
        if self.markup is not None:
            body["markup"] = self.markup
        if self.edit is not None:
            body["edit"] = self.edit
        return body

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Notification:
        """The notification a ``cm.notify`` job carries."""
        markup = payload.get("markup")
        edit = payload.get("edit")
        return cls(
            str(payload["notification"]),
            int(payload["chat"]),
            str(payload["text"]),
            markup=dict(markup) if markup is not None else None,
            edit=int(edit) if edit is not None else None,
        )


class Notifier:
    """Enqueues notifications on ``queue`` (``cm.notify``), one lane per chat, skipping the
    chats on the blocklist."""

    def __init__(self, queue: Queue, minter: Minter) -> None:
        self.queue = queue
        self.minter = minter
        self.blocklist = Blocklist(queue.wire, queue.name)

    async def notify(
        self,
        chat: int,
        text: str,
        *,
        markup: dict[str, Any] | None = None,
        edit: int | None = None,
        dedup_key: str | None = None,
    ) -> Verdict | Skipped:
        """Enqueue ``text`` for ``chat``; with ``dedup_key``, once while the first is pending.

        A chat that blocked the bot gets nothing: the answer is ``Skipped(chat, "chat blocked")``.
        """
        if await self.blocklist.has(chat):
            return Skipped(chat, "chat blocked")
        notification = Notification(self.minter.mint("NOT"), chat, text, markup, edit)
        return await self.queue.enqueue(
            notification.payload(), group=str(chat), dedup_key=dedup_key
        )

"""The notifier: a message for a chat becomes a job on that chat's lane of ``cm.notify``.

No network I/O here: sending (rate limits, retries, Telegram) is the notification worker's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echomq import Minter, Queue, Verdict


@dataclass(frozen=True, slots=True)
class Notification:
    """One message for one chat: ``id`` is its ``NOT`` id, ``chat`` the Telegram chat id."""

    id: str
    chat: int
    text: str

    def payload(self) -> dict[str, Any]:
        """The job payload on ``cm.notify``."""
        return {"notification": self.id, "chat": self.chat, "text": self.text}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Notification:
        """The notification a ``cm.notify`` job carries."""
        return cls(str(payload["notification"]), int(payload["chat"]), str(payload["text"]))


class Notifier:
    """Enqueues notifications on ``queue`` (``cm.notify``), one lane per chat."""

    def __init__(self, queue: Queue, minter: Minter) -> None:
        self.queue = queue
        self.minter = minter

    async def notify(self, chat: int, text: str, *, dedup_key: str | None = None) -> Verdict:
        """Enqueue ``text`` for ``chat``; with ``dedup_key``, once while the first is pending."""
        notification = Notification(self.minter.mint("NOT"), chat, text)
        return await self.queue.enqueue(
            notification.payload(), group=str(chat), dedup_key=dedup_key
        )

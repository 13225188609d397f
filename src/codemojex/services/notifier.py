"""The notifier: a message for a chat becomes a job on that chat's lane of ``cm.notify``.

No network I/O here: sending (rate limits, retries, Telegram) is the notification worker's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echomq import Minter, Queue, Verdict


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
    """Enqueues notifications on ``queue`` (``cm.notify``), one lane per chat."""

    def __init__(self, queue: Queue, minter: Minter) -> None:
        self.queue = queue
        self.minter = minter

    async def notify(
        self,
        chat: int,
        text: str,
        *,
        markup: dict[str, Any] | None = None,
        edit: int | None = None,
        dedup_key: str | None = None,
    ) -> Verdict:
        """Enqueue ``text`` for ``chat``; with ``dedup_key``, once while the first is pending."""
        notification = Notification(self.minter.mint("NOT"), chat, text, markup, edit)
        return await self.queue.enqueue(
            notification.payload(), group=str(chat), dedup_key=dedup_key
        )

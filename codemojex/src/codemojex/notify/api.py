"""The notification stage's producer API, the one way other stages reach it: a message for a
chat becomes a ``notify`` task on that chat's lane of ``cm.notify`` (:class:`Notifier`),
unless the chat blocked the bot (the blocklist the notification worker keeps). The task itself
is registered in :mod:`codemojex.notify.tasks`.

No Telegram I/O here: sending (rate limits, retries, Telegram) is the notification worker's job.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from codemojex.keyspace import NotifyKeys
from codemojex.notify.blocklist import Blocklist
from codemojex.notify.status import StatusBoard
from codemojex.store.kv import Valkey
from echomq import Task, Verdict
from echomq.engine import Minter


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


@dataclass(frozen=True, slots=True)
class Notification:
    """One message for one chat: ``id`` is its ``NOT`` id, ``chat`` the Telegram chat id.

    ``markup`` is a Bot API ``reply_markup`` object (an inline keyboard); ``edit`` names a message
    of the bot's in ``chat`` whose text (and markup) this notification replaces instead of sending
    a new message. ``status`` (a ``GAM`` id) makes it the group game's live status message:
    ``text`` is its title, the lines are read when it is sent, ``version`` is the status it
    must show at least (see :mod:`codemojex.notify.status`). ``origin`` (a group's chat id)
    and ``name`` (the player's): a private message about a group game, so when the player
    never started the bot the worker can tell that group how to, by name. ``reply_to``: a
    message in ``chat`` this one answers (sent as a reply to it).
    """

    id: str
    chat: int
    text: str
    markup: dict[str, Any] | None = None
    edit: int | None = None
    status: str | None = None
    version: int = 0
    origin: int | None = None
    name: str = ""
    reply_to: int | None = None

    def payload(self) -> dict[str, Any]:
        """The arguments of its ``notify`` task (optional fields only when set)."""
        body: dict[str, Any] = {"notification": self.id, "chat": self.chat, "text": self.text}
        if self.markup is not None:
            body["markup"] = self.markup
        if self.edit is not None:
            body["edit"] = self.edit
        if self.status is not None:
            body["status"] = self.status
            body["version"] = self.version
        if self.origin is not None:
            body["origin"] = self.origin
            body["name"] = self.name
        if self.reply_to is not None:
            body["reply_to"] = self.reply_to
        return body

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Notification:
        """The notification a ``notify`` task's arguments describe (``KeyError``,
        ``TypeError``, ``ValueError`` when they describe none)."""
        markup = payload.get("markup")
        edit = payload.get("edit")
        status = payload.get("status")
        origin = payload.get("origin")
        reply_to = payload.get("reply_to")
        return cls(
            str(payload["notification"]),
            int(payload["chat"]),
            str(payload["text"]),
            markup=dict(markup) if markup is not None else None,
            edit=int(edit) if edit is not None else None,
            status=str(status) if status is not None else None,
            version=int(payload.get("version", 0)),
            origin=int(origin) if origin is not None else None,
            name=str(payload.get("name") or ""),
            reply_to=int(reply_to) if reply_to is not None else None,
        )


HELD_MOST: Final = 50
"""Notifications kept per private chat that refuses the bot (the newest; older ones go)."""

HELD_KEEP: Final = 7 * 24 * 3600.0
"""Seconds the held notifications of a chat outlive the last one held."""


def is_kept(notification: Notification) -> bool:
    """Whether a notification a private chat refused is held for later: a group game's result
    sent privately (``origin`` set) is; a command's reply (stale by then) is not."""
    return notification.origin is not None and notification.edit is None


class Held:
    """The notifications of private chats that refuse the bot (a 403: the user never started
    it, or blocked it), kept until the chat talks to the bot again; never retried meanwhile."""

    def __init__(self, kv: Valkey, keys: NotifyKeys) -> None:
        self.kv = kv
        self.keys = keys

    async def keep(self, notification: Notification) -> None:
        payload = json.dumps(notification.payload(), ensure_ascii=False)
        await self.kv.push_capped(self.keys.held(notification.chat), payload, HELD_MOST, HELD_KEEP)

    async def release(self, chat: int) -> list[Notification]:
        """Take every notification held for ``chat``, oldest first (atomically: once)."""
        found = await self.kv.pop_all(self.keys.held(chat), HELD_MOST)
        return [Notification.from_payload(json.loads(item)) for item in found]


class Notifier:
    """Enqueues notifications as ``notify`` tasks (on ``cm.notify``), one lane per chat. A
    private chat on the blocklist gets none: its group results are held (:class:`Held`) and
    sent when it talks to the bot again, anything else is skipped."""

    def __init__(self, notify: Task[..., None], minter: Minter) -> None:
        self.task = notify
        self.minter = minter
        #: ``cm.notify``, whose hash tag the stage's own keys share.
        self.queue = notify.app.queue(notify.queue)
        kv = Valkey(self.queue.wire)
        self.blocklist = Blocklist(kv, NotifyKeys(self.queue.name))
        self.held = Held(kv, NotifyKeys(self.queue.name))
        self.statuses = StatusBoard(kv, NotifyKeys(self.queue.name))

    async def _enqueue(self, notification: Notification, dedup_key: str | None) -> Verdict:
        sending = self.task.using(lane=str(notification.chat), dedup_key=dedup_key)
        return (await sending.enqueue(**notification.payload())).verdict

    async def unblock(self, chat: int) -> bool:
        """``chat`` talks to the bot again: take it off the blocklist and enqueue what was held
        for it, oldest first; True when it was on the blocklist."""
        # Issued together, so the pipelined wire sends both in one write: one round trip on
        # every private update, which is when this runs.
        was_blocked, held = await asyncio.gather(
            self.blocklist.unmark(chat), self.held.release(chat)
        )
        for notification in held:
            await self._enqueue(notification, None)
        return was_blocked

    async def notify(
        self,
        chat: int,
        text: str,
        *,
        markup: dict[str, Any] | None = None,
        edit: int | None = None,
        dedup_key: str | None = None,
        origin: int | None = None,
        name: str = "",
    ) -> Verdict | Skipped:
        """Enqueue ``text`` for ``chat``; with ``dedup_key``, once while the first is pending.

        A private chat that refuses the bot (it never started it, or blocked it) gets nothing
        now: the answer is ``Skipped(chat, "chat blocked")``; a group game's result for it
        (:func:`is_kept`) is held and sent when the chat talks to the bot again.
        ``origin`` and ``name``: see :class:`Notification`.
        """
        notification = Notification(
            self.minter.mint("NOT"), chat, text, markup, edit, origin=origin, name=name
        )
        if await self.blocklist.has(chat):
            if is_kept(notification):
                await self.held.keep(notification)
            return Skipped(chat, "chat blocked")
        return await self._enqueue(notification, dedup_key)

    async def status(
        self,
        chat: int,
        game: str,
        *,
        title: str,
        player: str,
        line: str,
        rank: int,
        at: int | None = None,
    ) -> Verdict | Skipped:
        """Put ``player``'s ``line`` on ``game``'s live status message in group ``chat`` (best
        ``rank`` first) and enqueue its update: one send or edit shows every line set so far,
        so updates that queue up behind the group's budget cost one edit, not one each.
        ``at``: the guess's message id in the group; once the status has scrolled that far
        away, the update re-posts it at the bottom as a reply to the newest guess."""
        if await self.blocklist.has(chat):
            return Skipped(chat, "chat blocked")
        version = await self.statuses.post(game, player, line, rank, at=at)
        notification = Notification(
            self.minter.mint("NOT"), chat, title, status=game, version=version
        )
        return await self._enqueue(notification, f"status:{game}:{version}")

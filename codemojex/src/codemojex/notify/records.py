"""What the notification worker remembers per notification and per chat: the ``NOT`` ids it
delivered lately (at most one delivery per id on our side) and the chats cooling down after a
429, each a key of :class:`~codemojex.keyspace.NotifyKeys`."""

from __future__ import annotations

from dataclasses import dataclass

from codemojex.keyspace import NotifyKeys
from codemojex.store.kv import Valkey


@dataclass(frozen=True, slots=True)
class Before:
    """What is known of a notification before its send."""

    delivered: bool
    blocked: bool
    cooling: float
    """Seconds the chat is still under flood control (0: none)."""


class Records:
    """The delivered ids (kept ``keep`` seconds) and the cooling chats of one notify queue."""

    def __init__(self, kv: Valkey, keys: NotifyKeys, keep: float) -> None:
        self.kv = kv
        self.keys = keys
        self.keep = keep

    async def before(self, notification: str, chat: int) -> Before:
        """One round trip: delivered already? the chat blocked? cooling for how long?"""
        probe = await self.kv.probe(
            self.keys.sent(notification), (self.keys.blocked, chat), self.keys.cooling(chat)
        )
        return Before(probe.exists, probe.is_member, max(0, probe.ttl_ms) / 1000)

    async def delivered(self, notification: str, message_id: int) -> None:
        await self.kv.put(self.keys.sent(notification), message_id, self.keep)

    async def cool(self, chat: int, seconds: float) -> None:
        """Hold every send to ``chat`` for ``seconds`` (a 429's ``retry_after``)."""
        await self.kv.put(self.keys.cooling(chat), 1, seconds)

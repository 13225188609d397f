"""What the notification worker remembers per notification: the ``NOT`` ids it delivered lately
(at most one delivery per id on our side), a key of :class:`~codemojex.keyspace.NotifyKeys`. A
chat under a 429 is not remembered here: its lane cools in the engine (echomq's ``Cool``)."""

from __future__ import annotations

from dataclasses import dataclass

from codemojex.keyspace import NotifyKeys
from codemojex.store.kv import Valkey


@dataclass(frozen=True, slots=True)
class Before:
    """What is known of a notification before its send."""

    delivered: bool
    blocked: bool


class Records:
    """The delivered ids (kept ``keep`` seconds) of one notify queue."""

    def __init__(self, kv: Valkey, keys: NotifyKeys, keep: float) -> None:
        self.kv = kv
        self.keys = keys
        self.keep = keep

    async def before(self, notification: str, chat: int) -> Before:
        """One round trip: delivered already? the chat blocked?"""
        probe = await self.kv.probe(self.keys.sent(notification), (self.keys.blocked, chat))
        return Before(probe.exists, probe.is_member)

    async def delivered(self, notification: str, message_id: int) -> None:
        await self.kv.put(self.keys.sent(notification), message_id, self.keep)

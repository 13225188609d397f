"""The chats that blocked the bot (a 403): a Valkey set under the notify queue's hash tag.

The notification worker marks a chat at its first 403; the notifier stops enqueueing for it; a
chat that talks to the bot again (the command worker sees it) is unmarked through the notifier.
"""

from __future__ import annotations

from codemojex.keyspace import NotifyKeys
from codemojex.store.kv import Valkey


class Blocklist:
    """The blocked chats of one notify queue (``keys``), on ``kv``."""

    def __init__(self, kv: Valkey, keys: NotifyKeys) -> None:
        self.kv = kv
        self.key = keys.blocked

    async def mark(self, chat: int) -> bool:
        """Mark ``chat`` blocked; True when it was not marked before."""
        return await self.kv.add(self.key, chat)

    async def unmark(self, chat: int) -> bool:
        """The chat accepts messages again; True when it was marked."""
        return await self.kv.remove(self.key, chat)

    async def has(self, chat: int) -> bool:
        return await self.kv.has(self.key, chat)

    async def chats(self) -> set[int]:
        return {int(chat) for chat in await self.kv.members(self.key)}

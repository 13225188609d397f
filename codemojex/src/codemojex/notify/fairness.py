"""The fairness layer: a lane per chat on ``cm.notify`` (one chat's burst cannot starve the
others: the engine's ring serves lanes in turn), and one send at a time per chat in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class ChatTurns:
    """One ``asyncio.Lock`` per chat while someone holds or waits for it. The lock is first
    come, first served, so a claimed batch of one lane goes out in lane order, and the second
    job of a chat that just answered 403 sees the chat blocked instead of sending."""

    def __init__(self) -> None:
        self._turns: dict[int, tuple[asyncio.Lock, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def turn(self, chat: int) -> AsyncIterator[None]:
        entry = self._turns.setdefault(chat, (asyncio.Lock(), [0]))
        entry[1][0] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1][0] -= 1
            if not entry[1][0]:
                del self._turns[chat]

    def __len__(self) -> int:
        return len(self._turns)

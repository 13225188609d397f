"""Asking for a game's close: a perfect score and the timer both enqueue the close on the game's
lane of ``cm-settle``; the settle worker makes it happen exactly once.

Both triggers share one dedup key per game, so while a close is waiting a second request is a
duplicate. The key lives :data:`CLOSE_DEDUP_TTL` seconds at most: a close job that died (dead
letters keep their dedup key) cannot block a later sweep from asking again.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from codemojex.store import Store, checked_id, expired_games
from echomq import Task, Verdict

if TYPE_CHECKING:
    from codemojex.game.settle import Settled

CLOSE_DEDUP_TTL: Final = 60.0
"""Seconds a close request of a game stays deduplicated (one close job per game meanwhile)."""


class CloseReason(StrEnum):
    """What asked for a close."""

    CRACKED = "cracked"
    """A guess scored 600."""
    TIMER = "timer"
    """The game's deadline passed."""


def close_dedup_key(game: str) -> str:
    """The dedup key every close request of ``game`` shares."""
    return f"close:{game}"


class Closer:
    """Enqueues closes as ``settle`` tasks (``cm-settle``); finds expired games in ``store``."""

    def __init__(self, store: Store, settle: Task[[str, str], Settled]) -> None:
        self.store = store
        self.settle = settle

    async def request(self, game: str, reason: CloseReason) -> Verdict:
        """Enqueue the close of ``game`` on its lane (a duplicate while one is waiting)."""
        game = checked_id(game, "GAM", "game")
        once = self.settle.using(dedup_key=close_dedup_key(game))
        handle = await once.enqueue(game, CloseReason(reason).value)
        return handle.verdict

    async def sweep(self, now: datetime | None = None) -> int:
        """The timer sweep: request the close of every open game past its deadline at ``now``.

        Returns how many closes were newly enqueued; run it periodically (every few seconds).
        """
        async with self.store.read() as session:
            games = await expired_games(session, now)
        enqueued = 0
        for game in games:
            verdict = await self.request(game, CloseReason.TIMER)
            enqueued += verdict.kind == "enqueued"
        return enqueued

"""A game's Valkey keys: the leaderboard (a sorted set of each player's best total) and the close
lock. Both live under the game's hash tag (:class:`codemojex.keyspace.GameKeys`), so one game's
keys share a cluster slot.

The board is derived data: SQL is the system of record, and a lost board can be rebuilt from the
scored guesses. ``ZADD … GT`` keeps the best total, so replaying a score never lowers it.
"""

from __future__ import annotations

from dataclasses import dataclass

from codemojex.keyspace import GameKeys
from codemojex.store._sql import checked_id
from echomq.wire import Wire


@dataclass(frozen=True, slots=True)
class Standing:
    """One row of a board: a player and the best total they scored in the game."""

    player: str
    total: int


class Board:
    """The boards and close locks of every game, on one Valkey ``wire`` (e.g. the queues' pool),
    under ``keys`` (the deployment's :attr:`codemojex.keyspace.Keyspace.game`)."""

    def __init__(self, wire: Wire, keys: GameKeys) -> None:
        self.wire = wire
        self.keys = keys

    def _board(self, game: str) -> str:
        return self.keys.board(checked_id(game, "GAM", "game"))

    def _lock(self, game: str) -> str:
        return self.keys.close_lock(checked_id(game, "GAM", "game"))

    # -- the leaderboard -----------------------------------------------------------------------

    async def record(self, game: str, player: str, total: int) -> bool:
        """Offer ``total`` as ``player``'s best in ``game``; ``True`` if it raised their best.

        Idempotent and order-free: the set keeps the greatest total ever offered.
        """
        player = checked_id(player, "PLR", "player")
        key = self._board(game)
        changed = await self.wire.call("ZADD", key, "GT", "CH", total, player)
        return int(changed) == 1

    async def best(self, game: str, player: str) -> int | None:
        """``player``'s best total in ``game``, or ``None`` if they have no scored guess."""
        player = checked_id(player, "PLR", "player")
        value = await self.wire.call("ZSCORE", self._board(game), player)
        return None if value is None else int(float(value))

    async def top(self, game: str, n: int = 10) -> tuple[Standing, ...]:
        """The ``n`` best players of ``game``, best first, ties in ascending id order."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n {n!r}: the number of rows is an integer >= 1")
        key = self._board(game)
        flat = await self.wire.call("ZRANGE", key, 0, n - 1, "REV", "WITHSCORES")
        rows = _standings(flat)
        if len(rows) < n:
            return tuple(sorted(rows, key=_rank))
        # REV orders ties by descending id and may cut a tie in two at the n-th row: take the
        # players tied at the lowest total shown in ascending id order instead.
        lowest = rows[-1].total
        above = [row for row in rows if row.total > lowest]
        tied = await self.wire.call(
            "ZRANGE", key, lowest, lowest, "BYSCORE", "LIMIT", 0, n - len(above)
        )
        return tuple(sorted(above, key=_rank)) + tuple(Standing(_text(m), lowest) for m in tied)

    # -- the close lock ------------------------------------------------------------------------

    async def take_close_lock(self, game: str, holder: str, ttl_ms: int) -> str | None:
        """``SET … NX``: make ``holder`` the closer of ``game`` for ``ttl_ms`` unless someone is.

        Returns ``None`` when ``holder`` took the lock, else the value already there (which is
        ``holder`` itself when an earlier attempt of the same holder took it).
        """
        found = await self.wire.call("SET", self._lock(game), holder, "NX", "GET", "PX", ttl_ms)
        return None if found is None else _text(found)

    async def mark_settled(self, game: str, mark: str, keep_s: int) -> None:
        """Leave ``mark`` in the close lock of a settled ``game`` and let the lock and the board
        disappear after ``keep_s`` seconds."""
        await self.wire.call_many(
            [
                ("SET", self._lock(game), mark, "EX", keep_s),
                ("EXPIRE", self._board(game), keep_s),
            ]
        )


def _standings(reply: list[object]) -> list[Standing]:
    # RESP3 answers WITHSCORES as [member, score] pairs, RESP2 as one flat list.
    pairs: list[tuple[object, object]] = []
    if reply and isinstance(reply[0], list):
        pairs = [(pair[0], pair[1]) for pair in reply if isinstance(pair, list)]
    else:
        pairs = list(zip(reply[::2], reply[1::2], strict=True))
    return [Standing(_text(member), int(float(_text(points)))) for member, points in pairs]


def _rank(row: Standing) -> tuple[int, str]:
    return -row.total, row.player


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

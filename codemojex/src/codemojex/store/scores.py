"""A player's best scores across games, read from the scored guesses (the system of record; the
Valkey boards only cover games still kept)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.store._sql import checked_id
from codemojex.store.models import GuessRow


@dataclass(frozen=True, slots=True)
class BestScore:
    """``player``'s best total in ``game`` and how many guesses they made there."""

    game: str
    total: int
    guesses: int


async def best_scores(
    session: AsyncSession, player: str, *, limit: int = 5
) -> tuple[BestScore, ...]:
    """``player``'s best total per game, best first (newer games first among ties), at most
    ``limit`` games; games with no scored guess yet are left out."""
    player = checked_id(player, "PLR", "player")
    best = func.max(GuessRow.score_total)
    rows = await session.execute(
        select(GuessRow.game_id, best.label("best"), func.count().label("guesses"))
        .where(GuessRow.player_id == player)
        .group_by(GuessRow.game_id)
        .having(best.is_not(None))
        .order_by(best.desc(), GuessRow.game_id.desc())
        .limit(limit)
    )
    return tuple(BestScore(row.game_id, int(row.best), int(row.guesses)) for row in rows)

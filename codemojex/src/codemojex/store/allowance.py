"""The daily clip allowance in the ledger: once per UTC day, a player who cannot pay a guess in
a free room is topped back up to :data:`~codemojex.domain.DAILY_CLIPS` (the rule is
:func:`codemojex.domain.allowance`). The grant is a ledger credit whose reference is the day, so
"granted today" is read from the system of record, and the grant commits with the guess it
pays for, or not at all.

At most one grant a day per player on both databases: the grant first locks the player's clips
wallet (``SELECT … FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already serialises writers), so
concurrent submits take turns and each later one reads the committed grant (PostgreSQL at READ
COMMITTED gives each statement a fresh snapshot). A unique index on the day's key
(:data:`~codemojex.store.models.ALLOWANCE_ONCE_INDEX`) is the backstop in the database itself."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.domain import Currency, allowance
from codemojex.store._sql import checked_id, utc_now
from codemojex.store.errors import NotFound
from codemojex.store.models import ALLOWANCE_REASON, LedgerRow, WalletRow
from codemojex.store.wallets import credit
from echomq.engine import Minter

__all__ = ["ALLOWANCE_REASON", "grant_allowance"]


async def grant_allowance(
    session: AsyncSession,
    player: str,
    fee: int,
    *,
    minter: Minter,
    now: datetime | None = None,
) -> int:
    """Credit ``player`` today's allowance if the rule grants one now; the clips credited (0:
    none, because they can pay ``fee`` or had today's already)."""
    player = checked_id(player, "PLR", "player")
    day = utc_now(now).date().isoformat()
    # The lock first: a concurrent grant for this player waits here until the first commits.
    clips = await session.scalar(
        select(WalletRow.balance)
        .where(WalletRow.player_id == player, WalletRow.currency == Currency.CLIPS)
        .with_for_update()
    )
    if clips is None:
        raise NotFound("player", player)
    granted = await session.scalar(
        select(func.count())
        .select_from(LedgerRow)
        .where(
            LedgerRow.player_id == player,
            LedgerRow.reason == ALLOWANCE_REASON,
            LedgerRow.reference == day,
        )
    )
    amount = allowance(clips, fee=fee, granted_today=bool(granted))
    if amount:
        await credit(
            session, player, Currency.CLIPS, amount, ALLOWANCE_REASON, day, minter=minter, now=now
        )
    return amount

"""The daily clip allowance in the ledger: once per UTC day, a player who cannot pay a guess in
a free room is topped back up to :data:`~codemojex.domain.DAILY_CLIPS` (the rule is
:func:`codemojex.domain.allowance`). The grant is a ledger credit whose reference is the day, so
"granted today" is read from the system of record, and the grant commits with the guess it
pays for, or not at all."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.domain import Currency, allowance
from codemojex.store._sql import checked_id, utc_now
from codemojex.store.models import LedgerRow
from codemojex.store.wallets import balances, credit
from echomq import Minter

ALLOWANCE_REASON: Final = "allowance"
"""The ledger reason of a daily top-up (its reference is the UTC day, ``YYYY-MM-DD``)."""


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
    granted = await session.scalar(
        select(func.count())
        .select_from(LedgerRow)
        .where(
            LedgerRow.player_id == player,
            LedgerRow.reason == ALLOWANCE_REASON,
            LedgerRow.reference == day,
        )
    )
    clips = (await balances(session, player)).clips
    amount = allowance(clips, fee=fee, granted_today=bool(granted))
    if amount:
        await credit(
            session, player, Currency.CLIPS, amount, ALLOWANCE_REASON, day, minter=minter, now=now
        )
    return amount

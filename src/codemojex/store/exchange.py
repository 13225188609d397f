"""The diamond exchange: diamonds into keys at the economy's rate, as one transaction of two
ledger rows (a ``convert`` debit of diamonds, a ``convert`` credit of keys) or nothing at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.domain import DIAMONDS_PER_KEY, Currency, EconomyError, diamonds_to_keys
from codemojex.store._sql import checked_id
from codemojex.store.wallets import credit, debit
from echomq import Minter

CONVERT_REASON: Final = "convert"
"""The ledger reason of both rows of a conversion (the credit's reference is the debit's id)."""


@dataclass(frozen=True, slots=True)
class Conversion:
    """A conversion done: ``diamonds`` spent, ``keys`` gained and the balances it left."""

    diamonds: int
    keys: int
    diamonds_left: int
    keys_now: int


async def convert_diamonds(
    session: AsyncSession,
    player: str,
    diamonds: int,
    *,
    minter: Minter,
    now: datetime | None = None,
) -> Conversion:
    """Turn ``diamonds`` (a positive multiple of :data:`DIAMONDS_PER_KEY`) of ``player``'s into
    keys, in the caller's transaction.

    Refused before any write with :class:`EconomyError` (not a positive multiple) or, from the
    debit, :class:`~codemojex.store.InsufficientFunds`; the caller's block rolls back on either.
    """
    player = checked_id(player, "PLR", "player")
    if type(diamonds) is not int or diamonds < DIAMONDS_PER_KEY or diamonds % DIAMONDS_PER_KEY:
        raise EconomyError(
            "diamonds",
            diamonds,
            "not_convertible",
            f"convert a positive multiple of {DIAMONDS_PER_KEY} diamonds",
        )
    keys, _ = diamonds_to_keys(diamonds)
    spent = await debit(
        session, player, Currency.DIAMONDS, diamonds, CONVERT_REASON, minter=minter, now=now
    )
    gained = await credit(
        session, player, Currency.KEYS, keys, CONVERT_REASON, spent.id, minter=minter, now=now
    )
    return Conversion(diamonds, keys, spent.balance, gained.balance)

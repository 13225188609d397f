"""The diamond exchange: diamonds into keys at the economy's rate, as one transaction of two
ledger rows (a ``convert`` debit of diamonds, a ``convert`` credit of keys) or nothing at all;
once per command job when the job is given (the debit's reference).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.domain import DIAMONDS_PER_KEY, Currency, EconomyError, diamonds_to_keys
from codemojex.store._sql import checked_id
from codemojex.store.models import LedgerRow
from codemojex.store.wallets import balances, credit, debit
from echomq.engine import Minter

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
    job: str | None = None,
    now: datetime | None = None,
) -> Conversion:
    """Turn ``diamonds`` (a positive multiple of :data:`DIAMONDS_PER_KEY`) of ``player``'s into
    keys, in the caller's transaction.

    ``job`` (a ``JOB`` id, the command job asking) makes it once per job: the debit carries it
    as its reference, unique among conversions, and a second call with the same ``job`` finds
    that debit and converts nothing (it answers the conversion done, with today's balances). Two
    such calls at once: one commits, the other's commit fails on the unique index.

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
    if job is not None:
        job = checked_id(job, "JOB", "job")
        done = await _converted_by(session, player, job)
        if done is not None:
            return done
    keys, _ = diamonds_to_keys(diamonds)
    spent = await debit(
        session, player, Currency.DIAMONDS, diamonds, CONVERT_REASON, job, minter=minter, now=now
    )
    gained = await credit(
        session, player, Currency.KEYS, keys, CONVERT_REASON, spent.id, minter=minter, now=now
    )
    return Conversion(diamonds, keys, spent.balance, gained.balance)


async def _converted_by(session: AsyncSession, player: str, job: str) -> Conversion | None:
    """The conversion ``job`` did already (its debit and the credit that references it)."""
    row = (
        await session.execute(
            select(LedgerRow.id, LedgerRow.delta).where(
                LedgerRow.reason == CONVERT_REASON,
                LedgerRow.delta < 0,
                LedgerRow.reference == job,
            )
        )
    ).one_or_none()
    if row is None:
        return None
    gained = await session.scalar(
        select(LedgerRow.delta).where(
            LedgerRow.reason == CONVERT_REASON, LedgerRow.reference == row.id
        )
    )
    now = await balances(session, player)
    return Conversion(-row.delta, int(gained or 0), now.diamonds, now.keys)

"""Players, their wallets and the append-only ledger: every balance change is one conditional
UPDATE plus one ``TXN`` row in the caller's transaction, and no balance ever goes below zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.domain import STARTING_CLIPS, Currency
from codemojex.store._sql import checked_amount, checked_id, insert_new, utc_now
from codemojex.store.errors import InsufficientFunds, NotFound
from codemojex.store.models import LedgerRow, PlayerRow, WalletRow
from echomq.engine import Minter

GRANT_REASON = "grant"
"""The ledger reason of the starting grant (its reference is the player's id)."""


@dataclass(frozen=True, slots=True)
class Player:
    """A player: the ``PLR`` id, the Telegram user it stands for, and a display name."""

    id: str
    telegram_id: int
    name: str


@dataclass(frozen=True, slots=True)
class Balances:
    """A player's three balances at one moment."""

    clips: int
    keys: int
    diamonds: int

    def of(self, currency: Currency) -> int:
        """The balance of ``currency``."""
        if currency is Currency.CLIPS:
            return self.clips
        return self.keys if currency is Currency.KEYS else self.diamonds


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One ledger row as written: ``delta`` is signed, ``balance`` is the balance it left."""

    id: str
    player: str
    currency: Currency
    delta: int
    reason: str
    reference: str | None
    balance: int


async def ensure_player(
    session: AsyncSession,
    telegram_id: int,
    name: str,
    minter: Minter,
    *,
    now: datetime | None = None,
) -> Player:
    """The player of Telegram user ``telegram_id``, created with its wallets and the starting
    grant of clips if there is none yet.

    Idempotent by Telegram id, also under concurrent callers: exactly one creates the player and
    writes the grant; the others (and every later call) read it back. ``name`` is only used when
    the player is created.
    """
    at = utc_now(now)
    player_id = minter.mint("PLR")
    created = await session.scalar(
        insert_new(
            session,
            PlayerRow,
            "telegram_id",
            {"id": player_id, "telegram_id": telegram_id, "name": name, "created_at": at},
        )
    )
    if created is None:
        found = await find_player(session, telegram_id)
        if found is None:  # pragma: no cover - the conflicting row exists by definition
            raise NotFound("player", f"telegram:{telegram_id}")
        return found
    await session.execute(
        insert(WalletRow),
        [{"player_id": player_id, "currency": currency, "balance": 0} for currency in Currency],
    )
    await credit(
        session, player_id, Currency.CLIPS, STARTING_CLIPS, GRANT_REASON, player_id,
        minter=minter, now=at,
    )  # fmt: skip
    return Player(id=player_id, telegram_id=telegram_id, name=name)


async def find_player(session: AsyncSession, telegram_id: int) -> Player | None:
    """The player of Telegram user ``telegram_id``, or ``None``."""
    row = (
        await session.execute(
            select(PlayerRow.id, PlayerRow.telegram_id, PlayerRow.name).where(
                PlayerRow.telegram_id == telegram_id
            )
        )
    ).one_or_none()
    return None if row is None else Player(id=row.id, telegram_id=row.telegram_id, name=row.name)


async def credit(
    session: AsyncSession,
    player: str,
    currency: Currency,
    amount: int,
    reason: str,
    reference: str | None = None,
    *,
    minter: Minter,
    now: datetime | None = None,
) -> LedgerEntry:
    """Add ``amount`` (≥ 1) of ``currency`` to ``player``'s balance and write its ``TXN`` row."""
    player = checked_id(player, "PLR", "player")
    currency = Currency(currency)
    amount = checked_amount(amount)
    balance = await session.scalar(
        update(WalletRow)
        .where(WalletRow.player_id == player, WalletRow.currency == currency)
        .values(balance=WalletRow.balance + amount)
        .returning(WalletRow.balance)
        .execution_options(synchronize_session=False)
    )
    if balance is None:
        raise NotFound("player", player)
    return await _write_ledger(
        session, player, currency, amount, reason, reference, balance, minter, now
    )


async def debit(
    session: AsyncSession,
    player: str,
    currency: Currency,
    amount: int,
    reason: str,
    reference: str | None = None,
    *,
    minter: Minter,
    now: datetime | None = None,
) -> LedgerEntry:
    """Take ``amount`` (≥ 1) of ``currency`` from ``player`` and write its ``TXN`` row.

    The balance changes in one conditional UPDATE (``… WHERE balance >= amount``), so concurrent
    debits can never overdraw: SQLite serialises writers, and PostgreSQL re-checks the condition
    on the locked row. A debit past zero raises :class:`InsufficientFunds` and writes nothing.
    """
    player = checked_id(player, "PLR", "player")
    currency = Currency(currency)
    amount = checked_amount(amount)
    balance = await session.scalar(
        update(WalletRow)
        .where(
            WalletRow.player_id == player,
            WalletRow.currency == currency,
            WalletRow.balance >= amount,
        )
        .values(balance=WalletRow.balance - amount)
        .returning(WalletRow.balance)
        .execution_options(synchronize_session=False)
    )
    if balance is None:
        current = await session.scalar(
            select(WalletRow.balance).where(
                WalletRow.player_id == player, WalletRow.currency == currency
            )
        )
        if current is None:
            raise NotFound("player", player)
        raise InsufficientFunds(player, currency, current, amount)
    return await _write_ledger(
        session, player, currency, -amount, reason, reference, balance, minter, now
    )


async def balances(session: AsyncSession, player: str) -> Balances:
    """``player``'s three balances (:class:`NotFound` if there is no such player)."""
    player = checked_id(player, "PLR", "player")
    rows = await session.execute(
        select(WalletRow.currency, WalletRow.balance).where(WalletRow.player_id == player)
    )
    by_currency = {row.currency: row.balance for row in rows}
    if not by_currency:
        raise NotFound("player", player)
    return Balances(
        clips=by_currency.get(Currency.CLIPS, 0),
        keys=by_currency.get(Currency.KEYS, 0),
        diamonds=by_currency.get(Currency.DIAMONDS, 0),
    )


async def ledger_sum(session: AsyncSession, player: str, currency: Currency) -> int:
    """The sum of ``player``'s ledger deltas in ``currency``; always equals the balance."""
    player = checked_id(player, "PLR", "player")
    total = await session.scalar(
        select(func.coalesce(func.sum(LedgerRow.delta), 0)).where(
            LedgerRow.player_id == player, LedgerRow.currency == Currency(currency)
        )
    )
    return int(total or 0)


async def _write_ledger(
    session: AsyncSession,
    player: str,
    currency: Currency,
    delta: int,
    reason: str,
    reference: str | None,
    balance: int,
    minter: Minter,
    now: datetime | None,
) -> LedgerEntry:
    txn = minter.mint("TXN")
    await session.execute(
        insert(LedgerRow).values(
            id=txn,
            player_id=player,
            currency=currency,
            delta=delta,
            reason=reason,
            reference=reference,
            created_at=utc_now(now),
        )
    )
    return LedgerEntry(
        id=txn,
        player=player,
        currency=currency,
        delta=delta,
        reason=reason,
        reference=reference,
        balance=balance,
    )

"""The SQL tables of the system of record: players, wallets, the append-only ledger, rooms,
games and guesses, as typed SQLAlchemy models. Every id is a branded id minted host-side; every
instant is stored as UTC; status words are stored as text under CHECK constraints.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Connection,
    DateTime,
    Dialect,
    Enum,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    event,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from codemojex.domain import Currency

CONVERT_ONCE_INDEX: Final = "ledger_convert_once"
"""The unique index that allows one conversion per command job (see :class:`LedgerRow`)."""

ALLOWANCE_REASON: Final = "allowance"
"""The ledger reason of a daily top-up (its reference is the UTC day, ``YYYY-MM-DD``)."""

ALLOWANCE_ONCE_INDEX: Final = "ledger_allowance_once"
"""The unique index that allows one daily allowance per player and day (see :class:`LedgerRow`)."""

ID_LENGTH: Final = 14
"""Every branded id is 14 ASCII bytes."""


class RoomKind(StrEnum):
    """Whether a room's guesses cost clips (``free``) or keys that feed a prize pool (``paid``)."""

    FREE = "free"
    PAID = "paid"


class RoomStatus(StrEnum):
    """A room is ``waiting`` for its next game or ``playing`` one."""

    WAITING = "waiting"
    PLAYING = "playing"


class GameStatus(StrEnum):
    """A game takes guesses while ``open``; ``closed`` is final."""

    OPEN = "open"
    CLOSED = "closed"


class UtcDateTime(TypeDecorator[datetime]):
    """An aware UTC instant: refuses naive values, stores UTC, reads back aware UTC.

    SQLite has no time zones and SQLAlchemy would drop the offset without converting, so every
    value is normalised to UTC before it is bound; comparisons in SQL then order correctly.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: pass an aware UTC instant")
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _words(enum: type[StrEnum], name: str) -> Enum:
    """A status word column: stored as its text value under a CHECK (never a native enum type)."""
    return Enum(
        enum,
        name=name,
        native_enum=False,
        create_constraint=True,
        length=max(len(member.value) for member in enum),
        values_callable=lambda members: [member.value for member in members],
        validate_strings=True,
    )


def _id(*args: Any, **kwargs: Any) -> Mapped[str]:
    return mapped_column(String(ID_LENGTH), *args, **kwargs)


class Base(DeclarativeBase):
    """The declarative base; constraint names follow one convention on every database."""

    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


class PlayerRow(Base):
    """A person: a ``PLR`` id and the Telegram user it stands for (one player per user)."""

    __tablename__ = "players"

    id: Mapped[str] = _id(primary_key=True)
    telegram_id: Mapped[int] = mapped_column(BigInteger, unique=True)
    name: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class WalletRow(Base):
    """One balance per player and currency; the CHECK is the backstop against overdrafts."""

    __tablename__ = "wallets"
    __table_args__ = (CheckConstraint("balance >= 0", name="balance_non_negative"),)

    player_id: Mapped[str] = _id(ForeignKey("players.id"), primary_key=True)
    currency: Mapped[Currency] = mapped_column(_words(Currency, "currency"), primary_key=True)
    balance: Mapped[int] = mapped_column(BigInteger)


class LedgerRow(Base):
    """One ``TXN`` per balance change (append-only: triggers refuse UPDATE and DELETE).

    The ledger's order is its id order, which is mint order; ``created_at`` is the host's clock.
    """

    __tablename__ = "ledger"
    __table_args__ = (
        CheckConstraint("delta <> 0", name="delta_non_zero"),
        Index(None, "player_id", "currency"),
        # A conversion's debit carries the command job that asked for it: one per job, so a
        # job run again after a crash cannot convert twice (NULL references stay unlimited).
        Index(
            CONVERT_ONCE_INDEX,
            "reference",
            unique=True,
            sqlite_where=text("reason = 'convert' AND delta < 0"),
            postgresql_where=text("reason = 'convert' AND delta < 0"),
        ),
        # The daily allowance's credit carries its UTC day: one per player and day.
        Index(
            ALLOWANCE_ONCE_INDEX,
            "player_id",
            "reference",
            unique=True,
            sqlite_where=text(f"reason = '{ALLOWANCE_REASON}'"),
            postgresql_where=text(f"reason = '{ALLOWANCE_REASON}'"),
        ),
    )

    id: Mapped[str] = _id(primary_key=True)
    player_id: Mapped[str] = _id(ForeignKey("players.id"))
    currency: Mapped[Currency] = mapped_column(_words(Currency, "currency"))
    delta: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str] = mapped_column(Text)
    reference: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class RoomRow(Base):
    """A Telegram chat where games run: its kind, its emoji set and whether a game is on."""

    __tablename__ = "rooms"

    id: Mapped[str] = _id(primary_key=True)
    telegram_chat_id: Mapped[int] = mapped_column(BigInteger, unique=True)
    kind: Mapped[RoomKind] = mapped_column(_words(RoomKind, "kind"))
    emoji_set: Mapped[str] = mapped_column(Text)
    status: Mapped[RoomStatus] = mapped_column(_words(RoomStatus, "status"))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class GameRow(Base):
    """One round in a room, immutable once started except its pool, status and winners.

    ``secret`` is a JSON list of symbols; no player-facing read ever selects it.
    """

    __tablename__ = "games"
    __table_args__ = (
        CheckConstraint("fee_amount >= 1", name="fee_positive"),
        CheckConstraint("pool >= 0", name="pool_non_negative"),
        Index(None, "room_id", "status"),
        Index(None, "status", "deadline"),
    )

    id: Mapped[str] = _id(primary_key=True)
    room_id: Mapped[str] = _id(ForeignKey("rooms.id"))
    keyboard: Mapped[str] = mapped_column(Text)
    secret: Mapped[str] = mapped_column(Text)
    deadline: Mapped[datetime] = mapped_column(UtcDateTime)
    fee_currency: Mapped[Currency] = mapped_column(_words(Currency, "fee_currency"))
    fee_amount: Mapped[int] = mapped_column(BigInteger)
    pool: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[GameStatus] = mapped_column(_words(GameStatus, "status"))
    winners: Mapped[str | None] = mapped_column(Text)
    top_score: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    closed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class GuessRow(Base):
    """A charged guess, written with its ``JOB`` id in the charging transaction, scored later."""

    __tablename__ = "guesses"
    __table_args__ = (
        Index(None, "game_id", "player_id"),
        Index(None, "score_total", "created_at"),
    )

    id: Mapped[str] = _id(primary_key=True)
    game_id: Mapped[str] = _id(ForeignKey("games.id"))
    player_id: Mapped[str] = _id(ForeignKey("players.id"))
    job_id: Mapped[str] = _id(unique=True)
    guess_text: Mapped[str] = mapped_column(Text)
    score_total: Mapped[int | None] = mapped_column(Integer)
    position_scores: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    scored_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


# The ledger is append-only in the database itself, not only by convention in this package.
_LEDGER_TRIGGERS: Final[dict[str, tuple[str, ...]]] = {
    "sqlite": (
        "CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger "
        "BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
        "CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger "
        "BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END",
    ),
    "postgresql": (
        "CREATE OR REPLACE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        "$body$ BEGIN RAISE EXCEPTION 'the ledger is append-only'; END $body$",
        "CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger "
        "FOR EACH ROW EXECUTE FUNCTION ledger_append_only()",
    ),
}


def _make_ledger_append_only(_table: Table, connection: Connection, **_: Any) -> None:
    for statement in _LEDGER_TRIGGERS.get(connection.dialect.name, ()):
        connection.exec_driver_sql(statement)


event.listen(LedgerRow.__table__, "after_create", _make_ledger_append_only)

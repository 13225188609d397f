"""Small helpers shared by the store's repositories: id checks, the clock, portable upserts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import ReturningInsert

from codemojex.domain import EconomyError
from codemojex.store.errors import InvalidId
from codemojex.store.models import Base
from echomq import InvalidArgument
from echomq.engine import validate_id


def checked_id(value: object, namespace: str, argument: str) -> str:
    """``value`` if it is a branded id of ``namespace``; otherwise :class:`InvalidId`."""
    try:
        return validate_id(value, namespace, argument)
    except InvalidArgument as error:
        raise InvalidId(argument, value, namespace, error.reason) from None


def checked_amount(amount: object) -> int:
    """``amount`` if it is a positive ``int``; otherwise :class:`EconomyError`."""
    if type(amount) is not int or amount < 1:
        raise EconomyError("amount", amount, "not_positive", "an amount is a whole number ≥ 1")
    return amount


def utc_now(now: datetime | None = None) -> datetime:
    """``now`` if given (aware), else the host's clock, in UTC."""
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"naive datetime {now!r}: pass an aware UTC instant")
    return now.astimezone(UTC)


def insert_new(
    session: AsyncSession, model: type[Base], unique: str, values: dict[str, Any]
) -> ReturningInsert[tuple[str]]:
    """``INSERT … ON CONFLICT (unique) DO NOTHING RETURNING id``: a row back only if inserted.

    Both dialects spell it the same way; under concurrent inserts of one key exactly one wins and
    the others see nothing inserted (PostgreSQL waits for the winner's commit before deciding).
    """
    id_column = model.__table__.c.id
    if session.get_bind().dialect.name == "postgresql":
        pg = postgresql.insert(model).values(values).on_conflict_do_nothing(index_elements=[unique])
        return pg.returning(id_column)
    lite = sqlite.insert(model).values(values).on_conflict_do_nothing(index_elements=[unique])
    return lite.returning(id_column)

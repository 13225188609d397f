"""Fixtures for the store tests: a fresh store per test on SQLite (a file under ``tmp_path``)
and, when ``CODEMOJEX_TEST_PG_URL`` is set, on PostgreSQL as well (a schema per test, dropped
afterwards, so reruns and parallel workers never meet).

Test modules import ``store_fixture`` and ``minter_fixture`` from here (they register as
``store`` and ``minter``), so the parametrisation lives in one place without a shared conftest.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.schema import DropSchema

from codemojex.domain import Currency
from codemojex.store import Store, ensure_player, open_store, sqlite_url
from codemojex.store.models import LedgerRow
from echomq.engine import Minter

PG_URL_VARIABLE = "CODEMOJEX_TEST_PG_URL"
BACKENDS = ["sqlite"] + (["postgresql"] if os.environ.get(PG_URL_VARIABLE) else [])


@pytest.fixture(name="store", params=BACKENDS)
async def store_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An empty system of record on each configured backend."""
    if request.param == "sqlite":
        opened = await open_store(sqlite_url(tmp_path / "codemojex.db"))
        try:
            yield opened
        finally:
            await opened.close()
        return
    schema = f"cm_test_{uuid.uuid4().hex[:16]}"
    opened = await open_store(os.environ[PG_URL_VARIABLE], schema=schema)
    try:
        yield opened
    finally:
        async with opened.engine.begin() as connection:
            await connection.execute(DropSchema(schema, cascade=True))
        await opened.close()


@pytest.fixture(name="minter")
def minter_fixture() -> Minter:
    """The id minter a test's writes share (thread-safe, so concurrent tasks may share it)."""
    return Minter(node=7)


async def new_player(store: Store, minter: Minter, telegram_id: int = 1001) -> str:
    """A player with the starting grant; returns its id."""
    async with store.transaction() as session:
        return (await ensure_player(session, telegram_id, "Ada", minter)).id


async def ledger_rows(store: Store, player: str, currency: Currency | None = None) -> int:
    """How many ledger rows ``player`` has (in ``currency``, when given)."""
    query = select(func.count()).select_from(LedgerRow).where(LedgerRow.player_id == player)
    if currency is not None:
        query = query.where(LedgerRow.currency == currency)
    async with store.read() as session:
        return int(await session.scalar(query) or 0)

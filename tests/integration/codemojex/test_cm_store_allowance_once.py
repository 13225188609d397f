"""The daily allowance once per player and day in the database itself, on each backend: a
second grant's ledger row for the same day is refused, and a database written before the unique
index gets it when opened (or opens without it, warning, when it already holds a doubled day)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from cm_store_fixtures import minter_fixture, new_player, store_fixture  # noqa: F401
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from codemojex.domain import Currency
from codemojex.store import Store, credit, open_store, sqlite_url
from codemojex.store.models import ALLOWANCE_ONCE_INDEX, ALLOWANCE_REASON
from echomq.engine import Minter

DAY = "2026-12-04"


async def test_the_database_refuses_a_second_allowance_for_a_day(
    store: Store, minter: Minter
) -> None:
    player = await new_player(store, minter)
    async with store.transaction() as session:
        await credit(session, player, Currency.CLIPS, 5, ALLOWANCE_REASON, DAY, minter=minter)
        await credit(session, player, Currency.CLIPS, 5, ALLOWANCE_REASON, "2026-12-05",
                     minter=minter)  # fmt: skip
    with pytest.raises(IntegrityError):
        async with store.transaction() as session:
            await credit(session, player, Currency.CLIPS, 5, ALLOWANCE_REASON, DAY, minter=minter)


async def _index_count(store: Store) -> int:
    async with store.read() as session:
        found = await session.scalar(
            text("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = :name"),
            {"name": ALLOWANCE_ONCE_INDEX},
        )
    return int(found or 0)


async def test_an_older_database_gets_the_index_unless_it_holds_a_doubled_day(
    tmp_path: Path, minter: Minter, caplog: pytest.LogCaptureFixture
) -> None:
    url = sqlite_url(tmp_path / "old.db")
    store = await open_store(url)
    try:
        player = await new_player(store, minter)
        async with store.transaction() as session:
            await session.execute(text(f"DROP INDEX {ALLOWANCE_ONCE_INDEX}"))
    finally:
        await store.close()
    store = await open_store(url)
    try:
        assert await _index_count(store) == 1
        async with store.transaction() as session:  # the race's leftovers, before the index
            await session.execute(text(f"DROP INDEX {ALLOWANCE_ONCE_INDEX}"))
            for _ in range(2):
                await credit(session, player, Currency.CLIPS, 5, ALLOWANCE_REASON, DAY,
                             minter=minter)  # fmt: skip
    finally:
        await store.close()
    with caplog.at_level(logging.WARNING, logger="codemojex.store"):
        store = await open_store(url)
    try:
        assert await _index_count(store) == 0
        assert ALLOWANCE_ONCE_INDEX in caplog.text
    finally:
        await store.close()

"""Opening the system of record: SQLite files run in WAL mode with foreign keys on, reopening is
harmless, URLs get their async drivers, and the database's own constraints back the code up.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from cm_store_fixtures import minter_fixture, new_player, store_fixture  # noqa: F401
from sqlalchemy import insert, text, update
from sqlalchemy.exc import IntegrityError

from codemojex.domain import STARTING_CLIPS, Currency
from codemojex.store import (
    Store,
    UnsupportedDatabase,
    balances,
    ensure_player,
    open_store,
    sqlite_url,
)
from codemojex.store.models import GuessRow, WalletRow
from echomq.engine import Minter


async def test_a_sqlite_store_is_a_wal_file_with_foreign_keys_on(tmp_path: Path) -> None:
    path = tmp_path / "data" / "codemojex.db"
    path.parent.mkdir()
    store = await open_store(sqlite_url(path))
    try:
        assert store.dialect == "sqlite"
        async with store.read() as session:
            assert await session.scalar(text("PRAGMA journal_mode")) == "wal"
            assert await session.scalar(text("PRAGMA foreign_keys")) == 1
    finally:
        await store.close()
    assert path.is_file()


async def test_reopening_a_store_keeps_its_data(tmp_path: Path, minter: Minter) -> None:
    url = f"sqlite:///{tmp_path / 'codemojex.db'}"  # no driver named: aiosqlite is chosen
    first = await open_store(url)
    try:
        async with first.transaction() as session:
            player = await ensure_player(session, 1, "Ada", minter)
    finally:
        await first.close()

    second = await open_store(url)
    try:
        async with second.transaction() as session:
            assert await ensure_player(session, 1, "Ada", minter) == player
            assert (await balances(session, player.id)).clips == STARTING_CLIPS
    finally:
        await second.close()


async def test_only_sqlite_and_postgresql_are_supported(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedDatabase) as caught:
        await open_store("mysql+aiomysql://root@localhost/test")
    assert caught.value.backend == "mysql"
    with pytest.raises(ValueError, match="PostgreSQL only"):
        await open_store(sqlite_url(tmp_path / "x.db"), schema="cm")


async def test_the_database_refuses_a_negative_balance_itself(store: Store, minter: Minter) -> None:
    player = await new_player(store, minter)

    with pytest.raises(IntegrityError, match="balance_non_negative"):
        async with store.transaction() as session:
            await session.execute(
                update(WalletRow)
                .where(WalletRow.player_id == player, WalletRow.currency == Currency.KEYS)
                .values(balance=-1)
            )

    async with store.read() as session:
        assert (await balances(session, player)).keys == 0


async def test_the_database_refuses_a_guess_of_an_unknown_game(
    store: Store, minter: Minter
) -> None:
    player = await new_player(store, minter)

    with pytest.raises(IntegrityError, match=r"(?i)foreign key"):
        async with store.transaction() as session:
            await session.execute(
                insert(GuessRow).values(
                    id=minter.mint("GES"),
                    game_id=minter.mint("GAM"),
                    player_id=player,
                    job_id=minter.mint("JOB"),
                    guess_text="🍎",
                    created_at=datetime.now(UTC),
                )
            )

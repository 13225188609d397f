"""A conversion once per command job, on each backend: the same job converts nothing twice, the
database itself refuses a second debit for it, and a database made before the unique index
gets it when opened."""

from __future__ import annotations

from pathlib import Path

import pytest
from cm_store_fixtures import minter_fixture, new_player, store_fixture  # noqa: F401
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from codemojex.domain import Currency
from codemojex.store import Store, balances, credit, debit, open_store, sqlite_url
from codemojex.store.exchange import CONVERT_REASON, convert_diamonds
from codemojex.store.models import CONVERT_ONCE_INDEX
from echomq.engine import Minter


async def _rich_player(store: Store, minter: Minter) -> str:
    player = await new_player(store, minter)
    async with store.transaction() as session:
        await credit(session, player, Currency.DIAMONDS, 30, "test", minter=minter)
    return player


async def test_the_same_job_converts_once(store: Store, minter: Minter) -> None:
    player = await _rich_player(store, minter)
    job = minter.mint("JOB")
    async with store.transaction() as session:
        first = await convert_diamonds(session, player, 10, minter=minter, job=job)
    async with store.transaction() as session:
        again = await convert_diamonds(session, player, 10, minter=minter, job=job)
    assert (first.diamonds, first.keys, first.diamonds_left, first.keys_now) == (10, 1, 20, 1)
    assert again == first
    async with store.transaction() as session:  # another job converts again
        await convert_diamonds(session, player, 10, minter=minter, job=minter.mint("JOB"))
        await convert_diamonds(session, player, 10, minter=minter)  # no job: no limit
    async with store.read() as session:
        wallet = await balances(session, player)
    assert (wallet.diamonds, wallet.keys) == (0, 3)


async def test_the_database_refuses_a_second_conversion_debit_for_a_job(
    store: Store, minter: Minter
) -> None:
    """Two runs of one job at once (a reap while the first still ran): one of them fails."""
    player = await _rich_player(store, minter)
    job = minter.mint("JOB")
    async with store.transaction() as session:
        await convert_diamonds(session, player, 10, minter=minter, job=job)
    with pytest.raises(IntegrityError):
        async with store.transaction() as session:
            await debit(session, player, Currency.DIAMONDS, 10, CONVERT_REASON, job, minter=minter)
    async with store.read() as session:
        assert (await balances(session, player)).diamonds == 20


async def test_an_older_database_gets_the_index_when_opened(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "old.db")
    store = await open_store(url)
    try:
        async with store.transaction() as session:
            await session.execute(text(f"DROP INDEX {CONVERT_ONCE_INDEX}"))
    finally:
        await store.close()
    store = await open_store(url)
    try:
        async with store.read() as session:
            found = await session.scalar(
                text("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = :name"),
                {"name": CONVERT_ONCE_INDEX},
            )
        assert found == 1
    finally:
        await store.close()

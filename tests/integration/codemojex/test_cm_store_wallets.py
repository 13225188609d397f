"""Players, wallets and the ledger on a real database: the grant is written once, a debit never
overdraws (also under 50 concurrent debits), and the ledger always sums to the balance.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from cm_store_fixtures import (  # noqa: F401 (fixtures register by import)
    ledger_rows,
    minter_fixture,
    new_player,
    store_fixture,
)
from sqlalchemy import delete, update
from sqlalchemy.exc import DBAPIError

from codemojex.domain import STARTING_CLIPS, CodemojexError, Currency, EconomyError
from codemojex.store import (
    Balances,
    InsufficientFunds,
    InvalidId,
    NotFound,
    Store,
    balances,
    credit,
    debit,
    ensure_player,
    find_player,
    ledger_sum,
)
from codemojex.store.models import LedgerRow
from echomq.engine import Minter


async def test_a_new_player_gets_the_starting_grant_exactly_once(
    store: Store, minter: Minter
) -> None:
    async with store.transaction() as session:
        first = await ensure_player(session, 42, "Ada", minter)
    async with store.transaction() as session:
        again = await ensure_player(session, 42, "Ada Lovelace", minter)

    assert again == first
    assert first.id.startswith("PLR")
    assert first.name == "Ada"
    async with store.read() as session:
        assert await balances(session, first.id) == Balances(
            clips=STARTING_CLIPS, keys=0, diamonds=0
        )
        assert await ledger_sum(session, first.id, Currency.CLIPS) == STARTING_CLIPS
        assert await find_player(session, 42) == first
        assert await find_player(session, 43) is None
    assert await ledger_rows(store, first.id) == 1


async def test_concurrent_first_contacts_create_one_player_and_one_grant(
    store: Store, minter: Minter
) -> None:
    async def contact() -> str:
        async with store.transaction() as session:
            return (await ensure_player(session, 7, "Grace", minter)).id

    ids = await asyncio.gather(*(contact() for _ in range(10)))

    assert len(set(ids)) == 1
    assert await ledger_rows(store, ids[0]) == 1
    async with store.read() as session:
        assert (await balances(session, ids[0])).clips == STARTING_CLIPS


async def test_credit_and_debit_write_one_ledger_row_each(store: Store, minter: Minter) -> None:
    player = await new_player(store, minter)
    async with store.transaction() as session:
        added = await credit(
            session, player, Currency.KEYS, 5, "purchase", "ORD0000000001", minter=minter
        )
        taken = await debit(session, player, Currency.KEYS, 3, "guess", minter=minter)

    assert (added.delta, added.balance, added.reason, added.reference) == (
        5,
        5,
        "purchase",
        "ORD0000000001",
    )
    assert (taken.delta, taken.balance, taken.currency) == (-3, 2, Currency.KEYS)
    assert added.id.startswith("TXN")
    assert added.id < taken.id
    async with store.read() as session:
        assert (await balances(session, player)).keys == 2
        assert await ledger_sum(session, player, Currency.KEYS) == 2
    assert await ledger_rows(store, player, Currency.KEYS) == 2


async def test_a_debit_past_zero_is_refused_and_changes_nothing(
    store: Store, minter: Minter
) -> None:
    player = await new_player(store, minter)
    async with store.transaction() as session:
        await credit(session, player, Currency.KEYS, 3, "purchase", minter=minter)

    with pytest.raises(InsufficientFunds) as caught:
        async with store.transaction() as session:
            await debit(session, player, Currency.KEYS, 4, "guess", minter=minter)

    refusal = caught.value
    assert isinstance(refusal, CodemojexError)
    assert str(refusal) == "not enough keys: the balance is 3, the charge is 4"
    assert (refusal.player, refusal.currency, refusal.balance, refusal.amount) == (
        player,
        Currency.KEYS,
        3,
        4,
    )
    assert refusal.reason == "insufficient_funds"
    async with store.read() as session:
        assert await balances(session, player) == Balances(clips=STARTING_CLIPS, keys=3, diamonds=0)
        assert await ledger_sum(session, player, Currency.KEYS) == 3
    assert await ledger_rows(store, player) == 2


async def test_a_refused_debit_leaves_the_callers_transaction_usable(
    store: Store, minter: Minter
) -> None:
    player = await new_player(store, minter)
    async with store.transaction() as session:
        with pytest.raises(InsufficientFunds):
            await debit(session, player, Currency.DIAMONDS, 1, "convert", minter=minter)
        await credit(session, player, Currency.DIAMONDS, 10, "prize", minter=minter)

    async with store.read() as session:
        assert (await balances(session, player)).diamonds == 10
    assert await ledger_rows(store, player, Currency.DIAMONDS) == 1


async def test_fifty_concurrent_debits_never_overdraw(store: Store, minter: Minter) -> None:
    player = await new_player(store, minter)
    async with store.transaction() as session:
        await credit(session, player, Currency.KEYS, 20, "purchase", minter=minter)

    async def charge() -> bool:
        try:
            async with store.transaction() as session:
                await debit(session, player, Currency.KEYS, 1, "guess", minter=minter)
        except InsufficientFunds:
            return False
        return True

    outcomes = await asyncio.gather(*(charge() for _ in range(50)))

    assert outcomes.count(True) == 20
    async with store.read() as session:
        assert (await balances(session, player)).keys == 0
        assert await ledger_sum(session, player, Currency.KEYS) == 0
    assert await ledger_rows(store, player, Currency.KEYS) == 21


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_ledger_sums_to_the_balance_after_any_sequence(
    store: Store, minter: Minter, seed: int
) -> None:
    rng = random.Random(seed)
    player = await new_player(store, minter)
    expected = {Currency.CLIPS: STARTING_CLIPS, Currency.KEYS: 0, Currency.DIAMONDS: 0}
    for _ in range(60):
        currency = rng.choice(list(Currency))
        amount = rng.randint(1, 40)
        async with store.transaction() as session:
            if rng.random() < 0.5:
                await credit(session, player, currency, amount, "prize", minter=minter)
                expected[currency] += amount
                continue
            try:
                await debit(session, player, currency, amount, "guess", minter=minter)
            except InsufficientFunds:
                assert expected[currency] < amount
            else:
                expected[currency] -= amount

    async with store.read() as session:
        held = await balances(session, player)
        for currency in Currency:
            assert held.of(currency) == expected[currency]
            assert await ledger_sum(session, player, currency) == expected[currency]


async def test_the_ledger_is_append_only_in_the_database(store: Store, minter: Minter) -> None:
    player = await new_player(store, minter)

    with pytest.raises(DBAPIError, match="append-only"):
        async with store.transaction() as session:
            await session.execute(update(LedgerRow).values(delta=1_000_000))
    with pytest.raises(DBAPIError, match="append-only"):
        async with store.transaction() as session:
            await session.execute(delete(LedgerRow))

    async with store.read() as session:
        assert await ledger_sum(session, player, Currency.CLIPS) == STARTING_CLIPS


async def test_amounts_ids_and_players_are_checked(store: Store, minter: Minter) -> None:
    player = await new_player(store, minter)
    stranger = minter.mint("PLR")
    async with store.transaction() as session:
        for amount in (0, -1, 1.5, True):
            with pytest.raises(EconomyError):
                await credit(session, player, Currency.KEYS, amount, "x", minter=minter)  # type: ignore[arg-type]
        with pytest.raises(InvalidId) as caught:
            await debit(session, "GAM0000000001A", Currency.KEYS, 1, "x", minter=minter)
        assert caught.value.argument == "player"
        with pytest.raises(NotFound) as missing:
            await credit(session, stranger, Currency.KEYS, 1, "x", minter=minter)
        assert (missing.value.kind, missing.value.id) == ("player", stranger)
        with pytest.raises(NotFound):
            await debit(session, stranger, Currency.KEYS, 1, "x", minter=minter)
        with pytest.raises(NotFound):
            await balances(session, stranger)
    assert await ledger_rows(store, stranger) == 0

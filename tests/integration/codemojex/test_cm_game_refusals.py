"""Refused guesses: each refusal is a CodemojexError that names the problem, and a refused
guess charges nothing and enqueues nothing.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from test_cm_game_rig import (  # noqa: F401 (fixtures register by import)
    ledger_count,
    minter_fixture,
    new_game,
    new_players,
    pipeline_fixture,
    store_fixture,
)

from codemojex.domain import (
    DAILY_CLIPS,
    STARTING_CLIPS,
    CodemojexError,
    Currency,
    GuessError,
    GuessProblem,
)
from codemojex.pipeline import Pipeline
from codemojex.store import (
    GameClosed,
    InsufficientFunds,
    NotFound,
    Store,
    balances,
    close_game,
    debit,
)
from codemojex.store.allowance import ALLOWANCE_REASON
from echomq.engine import Minter

GOOD = "🍎🍌🍒🍇🐶🦊"


async def assert_nothing_happened(
    store: Store, pipeline: Pipeline, player: str, clips: int
) -> None:
    assert (await pipeline.queues.score.counts()).pending == 0
    assert await pipeline.guesses.depth(player) == 0
    assert await ledger_count(store, "guess") == {}
    async with store.read() as session:
        assert (await balances(session, player)).clips == clips


async def test_out_of_clips_the_daily_allowance_pays_once_then_the_guess_is_refused(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter)
    (player,) = await new_players(store, minter, 1)
    async with store.transaction() as session:
        await debit(session, player, Currency.CLIPS, STARTING_CLIPS, "spent", minter=minter)

    receipt = await pipeline.guesses.submit(game.id, player, GOOD)  # topped up, then charged
    assert receipt.topped_up == DAILY_CLIPS
    async with store.transaction() as session:
        assert (await balances(session, player)).clips == DAILY_CLIPS - 1
        await debit(session, player, Currency.CLIPS, DAILY_CLIPS - 1, "spent", minter=minter)
    assert await ledger_count(store, ALLOWANCE_REASON) == {player: 1}

    with pytest.raises(InsufficientFunds) as refused:  # once a day: not again today
        await pipeline.guesses.submit(game.id, player, GOOD)
    assert await ledger_count(store, ALLOWANCE_REASON) == {player: 1}

    assert refused.value.reason == "insufficient_funds"
    assert (refused.value.currency, refused.value.balance) == (Currency.CLIPS, 0)
    assert "not enough clips" in str(refused.value)
    assert await ledger_count(store, "guess") == {player: 1}  # the refused one charged nothing
    async with store.read() as session:
        assert (await balances(session, player)).clips == 0


async def test_twenty_concurrent_submits_with_no_clips_grant_one_allowance(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    # Issue 29.6: on PostgreSQL at READ COMMITTED each submit counted "no allowance today" and
    # credited one (15 grants for 20 submits); the day's grant must be one however they race.
    game = await new_game(store, minter)
    (player,) = await new_players(store, minter, 1)
    async with store.transaction() as session:
        await debit(session, player, Currency.CLIPS, STARTING_CLIPS, "spent", minter=minter)

    outcomes = await asyncio.gather(
        *(pipeline.guesses.submit(game.id, player, GOOD) for _ in range(20)),
        return_exceptions=True,
    )

    assert await ledger_count(store, ALLOWANCE_REASON) == {player: 1}
    charged = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
    assert [o for o in outcomes if isinstance(o, BaseException)] == []  # the one top-up pays all
    assert sum(receipt.topped_up for receipt in charged) == DAILY_CLIPS
    async with store.read() as session:
        assert (await balances(session, player)).clips == DAILY_CLIPS - len(charged)


async def test_a_guess_for_a_closed_game_is_refused(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter)
    (player,) = await new_players(store, minter, 1)
    async with store.transaction() as session:
        assert await close_game(session, game.id)

    with pytest.raises(GameClosed) as refused:
        await pipeline.guesses.submit(game.id, player, GOOD)

    assert (refused.value.reason, refused.value.game) == ("closed", game.id)
    assert str(refused.value) == f"game {game.id} is closed"
    await assert_nothing_happened(store, pipeline, player, STARTING_CLIPS)


async def test_a_game_closed_after_its_terms_were_read_refuses_at_the_charge(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter)
    (player,) = await new_players(store, minter, 1)
    await pipeline.guesses.submit(game.id, player, GOOD)
    async with store.transaction() as session:
        assert await close_game(session, game.id)

    with pytest.raises(GameClosed, match="is closed"):
        await pipeline.guesses.submit(game.id, player, GOOD)
    assert await ledger_count(store, "guess") == {player: 1}


async def test_a_guess_for_an_expired_game_is_refused(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter, deadline=datetime.now(UTC) - timedelta(seconds=1))
    (player,) = await new_players(store, minter, 1)

    with pytest.raises(GameClosed) as refused:
        await pipeline.guesses.submit(game.id, player, GOOD)

    assert refused.value.reason == "expired"
    assert str(refused.value) == f"game {game.id} has passed its deadline"
    await assert_nothing_happened(store, pipeline, player, STARTING_CLIPS)


@pytest.mark.parametrize(
    ("text", "problem", "words"),
    [
        ("🍎🍌🍒🍇🐶", GuessProblem.TOO_FEW, "too few emojis: found 5, need 6"),
        ("🍎 🍌 🍒 🍇 🐶 🦊 🐸", GuessProblem.TOO_MANY, "too many emojis: found 7, need 6"),
        ("🍎🍌🍒🍇🐶🥑", GuessProblem.UNKNOWN_SYMBOL, "not on the classic keyboard: 🥑"),
        ("/guess", GuessProblem.EMPTY, "empty guess"),
    ],
)
async def test_a_malformed_guess_is_refused_naming_the_problem(
    store: Store, pipeline: Pipeline, minter: Minter, text: str, problem: GuessProblem, words: str
) -> None:
    game = await new_game(store, minter)
    (player,) = await new_players(store, minter, 1)

    with pytest.raises(GuessError) as refused:
        await pipeline.guesses.submit(game.id, player, text)

    assert refused.value.reason is problem
    assert words in str(refused.value)
    await assert_nothing_happened(store, pipeline, player, STARTING_CLIPS)


async def test_an_unknown_game_or_player_is_refused(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter)
    (player,) = await new_players(store, minter, 1)

    with pytest.raises(NotFound, match="no game"):
        await pipeline.guesses.submit(minter.mint("GAM"), player, GOOD)
    with pytest.raises(NotFound, match="no player"):
        await pipeline.guesses.submit(game.id, minter.mint("PLR"), GOOD)
    with pytest.raises(CodemojexError, match="invalid game"):
        await pipeline.guesses.submit("not-a-game", player, GOOD)
    await assert_nothing_happened(store, pipeline, player, STARTING_CLIPS)

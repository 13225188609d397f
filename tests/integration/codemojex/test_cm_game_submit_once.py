"""A guess submitted under a given ``JOB`` id (the command worker passes its own job's) is
charged once however often it is submitted: a rerun after a crash finds the charged guess,
even when the game closed in between, and mints no second charge. On each backend."""

from __future__ import annotations

from test_cm_game_rig import (  # noqa: F401 (fixtures register by import)
    ledger_count,
    minter_fixture,
    new_game,
    new_players,
    pipeline_fixture,
    store_fixture,
)

from codemojex.domain import STARTING_CLIPS
from codemojex.pipeline import Pipeline
from codemojex.store import Store, balances, close_game
from codemojex.store.guesses import GUESS_REASON
from echomq.engine import Minter

GUESS = "🍎🍌🍒🍇🦊🐶"


async def test_the_same_job_is_one_guess_charged_once(
    store: Store, minter: Minter, pipeline: Pipeline
) -> None:
    game = await new_game(store, minter)
    [player] = await new_players(store, minter, 1)
    job = minter.mint("JOB")
    first = await pipeline.guesses.submit(game.id, player, GUESS, job=job)
    again = await pipeline.guesses.submit(game.id, player, GUESS, job=job)
    assert (again.guess, again.job, again.symbols, again.fee) == (
        first.guess,
        first.job,
        first.symbols,
        first.fee,
    )
    assert first.job == job
    async with store.transaction() as session:
        await close_game(session, game.id)
    # The game is over now: a rerun still answers the guess it charged, not "closed".
    late = await pipeline.guesses.submit(game.id, player, GUESS, job=job)
    assert late.guess == first.guess
    assert await ledger_count(store, GUESS_REASON, [player]) == {player: 1}
    async with store.read() as session:
        wallet = await balances(session, player)
    assert wallet.clips == STARTING_CLIPS - first.fee.amount

"""Flood fairness through the whole pipeline: one player who hammers guesses cannot starve the
others, because each player's guesses ride a lane of their own on ``cm``.
"""

from __future__ import annotations

import os
import time

from test_cm_game_rig import (  # noqa: F401 (fixtures register by import)
    Runs,
    minter_fixture,
    new_game,
    new_players,
    pipeline_fixture,
    store_fixture,
    submit_all,
    until,
)

from codemojex.pipeline import Pipeline, serving
from codemojex.store import Store
from echomq import ConsumerOptions
from echomq.engine import Minter

# The flood is 2 000 guesses (CI runs that: CODEMOJEX_TEST_FULL_SCALE=1); 500 show the
# same thing (the quiet players are done within the first ~105 scores either way) at a quarter
# of the charging time, for `make test` on a laptop.
FLOOD = 2000 if os.environ.get("CODEMOJEX_TEST_FULL_SCALE") else 500
QUIET_PLAYERS = 20
QUIET_EACH = 5


async def test_quiet_players_are_scored_before_the_floods_200th_guess(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter)
    (flooder,) = await new_players(store, minter, 1, clips=FLOOD)
    quiet = await new_players(store, minter, QUIET_PLAYERS, first=9000)
    started = time.monotonic()
    # Everything is charged and waiting before the one consumer starts, the flood first.
    await submit_all(
        pipeline.guesses.submit(game.id, flooder, "🍎🍌🍒🐸🐙🦋") for _ in range(FLOOD)
    )
    for player in quiet:
        for _ in range(QUIET_EACH):
            await pipeline.guesses.submit(game.id, player, "🍌🍎🍒🐸🐙🦋")
    assert await pipeline.guesses.depth(flooder) == FLOOD

    runs = Runs(pipeline, "score")
    async with serving([pipeline.score_consumer(ConsumerOptions(concurrency=1, beat=0.2))]):
        await until(lambda: _flood_reached(runs, flooder, 200), timeout=60)
    order = [scored.player for scored in runs.results]
    print(f"{FLOOD} + {QUIET_PLAYERS}×{QUIET_EACH} guesses in {time.monotonic() - started:.1f} s")

    flood_200th = [n for n, player in enumerate(order) if player == flooder][199]
    quiet_scored = [n for n, player in enumerate(order) if player != flooder]
    assert len(quiet_scored) == QUIET_PLAYERS * QUIET_EACH
    assert max(quiet_scored) < flood_200th


async def _flood_reached(runs: Runs, flooder: str, count: int) -> bool:
    return sum(scored.player == flooder for scored in runs.results) >= count

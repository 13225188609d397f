"""The money path against real Valkey, real consumers and a real database: every charged guess
is scored exactly once and charged exactly once — under concurrency, after a failed enqueue,
and when a sweep re-enqueues a guess that was already scored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter
from typing import Any

from cm_store_fixtures import ledger_rows  # noqa: F401
from test_cm_game_rig import (  # noqa: F401 (fixtures register by import)
    SECRET,
    Runs,
    ledger_count,
    minter_fixture,
    new_game,
    new_players,
    pipeline_fixture,
    store_fixture,
    submit_all,
    unscored,
    until,
)

from codemojex.domain import DEFAULT_SET, STARTING_CLIPS, Currency, score
from codemojex.game.api import Guesses, Receipt, register
from codemojex.pipeline import Pipeline, serving
from codemojex.store import Store, balances, ledger_sum
from echomq import App, ConnectionOptions, ConsumerOptions, Queue
from echomq.engine import Minter
from echomq.wire import Pool

# The 50 players × 20 guesses takes ~21 s on a 2-core machine (SQLite and PostgreSQL
# alike: the store's charging transaction costs ~10 ms of CPU), too long for every run of the
# suite; CODEMOJEX_TEST_FULL_SCALE=1 runs it at full size.
IS_FULL_SCALE = bool(os.environ.get("CODEMOJEX_TEST_FULL_SCALE"))
PLAYERS = 50 if IS_FULL_SCALE else 20
GUESSES_EACH = 20 if IS_FULL_SCALE else 10


def random_guesses(rng: random.Random, count: int) -> list[tuple[str, ...]]:
    """``count`` guesses on the classic keyboard, none of them the secret (no game closes)."""
    drawn: list[tuple[str, ...]] = []
    while len(drawn) < count:
        guess = tuple(rng.sample(DEFAULT_SET.symbols, 6))  # distinct, as every guess is
        if guess != SECRET:
            drawn.append(guess)
    return drawn


async def test_concurrent_guesses_are_scored_once_and_charged_once(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter)
    players = await new_players(store, minter, PLAYERS)
    rng = random.Random(6)
    planned = {player: random_guesses(rng, GUESSES_EACH) for player in players}
    runs = Runs(pipeline, "score")
    options = ConsumerOptions(concurrency=8, beat=0.2)
    consumers = [pipeline.score_consumer(options) for _ in range(2)]

    started = time.monotonic()
    async with serving(consumers):
        receipts: list[Receipt] = await submit_all(
            pipeline.guesses.submit(game.id, player, " ".join(guess))
            for player, guesses in planned.items()
            for guess in guesses
        )
        await until(lambda: _all_scored(store, pipeline.queues.score))
    elapsed = time.monotonic() - started
    print(f"{PLAYERS}×{GUESSES_EACH} guesses submitted and scored in {elapsed:.1f} s")

    assert all(receipt.is_queued for receipt in receipts)
    written = Counter(run.guess for run in runs.results if run.is_new)
    assert set(written) == {receipt.guess for receipt in receipts}
    assert set(written.values()) == {1}
    expected = {r.guess: score(r.symbols, SECRET).total for r in receipts}
    assert {run.guess: run.total for run in runs.results} == expected

    charged = await ledger_count(store, "guess")
    assert charged == dict.fromkeys(players, GUESSES_EACH)
    async with store.read() as session:
        for player in players:
            clips = (await balances(session, player)).clips
            assert clips == STARTING_CLIPS - GUESSES_EACH
            for currency in Currency:
                assert await ledger_sum(session, player, currency) == (
                    await balances(session, player)
                ).of(currency)

    best: dict[str, int] = {}
    for receipt in receipts:
        best[receipt.player] = max(best.get(receipt.player, 0), expected[receipt.guess])
    for player in players:
        assert await pipeline.board.best(game.id, player) == best[player]
    top = await pipeline.board.top(game.id, 3)
    assert [row.total for row in top] == sorted(best.values(), reverse=True)[:3]


async def _all_scored(store: Store, queue: Queue) -> bool:
    counts = await queue.counts()
    return counts.pending == counts.active == 0 and await unscored(store) == 0


async def charged_but_not_enqueued(
    store: Store, pipeline: Pipeline, minter: Minter, valkey_url: str
) -> tuple[Any, str, Receipt]:
    """A guess charged and recorded whose enqueue failed, as after a crash: (game, player, it)."""
    game = await new_game(store, minter)
    (player,) = await new_players(store, minter, 1)
    # The score task of an app whose connection is gone, as a crash after the commit would be.
    gone = await Pool(ConnectionOptions.from_url(valkey_url), 1).connect()
    await gone.close()
    cut_off = App(queue=pipeline.keyspace.score_queue, wire=gone, minter=minter)
    crashing = Guesses(store, register(cut_off, pipeline.keyspace).score, minter)
    receipt = await crashing.submit(game.id, player, "🍎🍌🍒🐸🐙🦋")
    assert not receipt.is_queued
    return game, player, receipt


async def test_a_guess_charged_but_not_enqueued_is_resweeped_and_scored_once(
    store: Store, pipeline: Pipeline, minter: Minter, valkey_url: str
) -> None:
    game, player, receipt = await charged_but_not_enqueued(store, pipeline, minter, valkey_url)
    score_queue = pipeline.queues.score
    assert await pipeline.guesses.depth(player) == 0
    swept = await pipeline.guesses.resweep(older_than=0)
    again = await pipeline.guesses.resweep(older_than=0)
    assert (swept.found, swept.enqueued) == (1, 1)
    assert (again.found, again.duplicate) == (1, 1)  # still waiting: the same job, not a copy
    assert await pipeline.guesses.depth(player) == 1
    assert (await score_queue.job(receipt.job)) is not None

    runs = Runs(pipeline, "score")
    async with serving([pipeline.score_consumer(ConsumerOptions(concurrency=1, beat=0.2))]):
        await until(lambda: _all_scored(store, score_queue))
        # A sweep racing the score (the job already completed) enqueues a fresh copy: it runs,
        # finds the score on file and writes nothing.
        again = pipeline.tasks.score.using(id=receipt.job)
        await again.enqueue(game.id, receipt.guess, player)
        await until(lambda: runs.reached(2))

    assert [(run.guess, run.is_new) for run in runs.results] == [
        (receipt.guess, True),
        (receipt.guess, False),
    ]
    assert runs.results[0].total == score(receipt.symbols, SECRET).total
    assert (await pipeline.guesses.resweep(older_than=0)).found == 0
    assert await ledger_count(store, "guess") == {player: 1}
    async with store.read() as session:
        assert (await balances(session, player)).clips == STARTING_CLIPS - 1
    # One update of the room's status and one copy for the player, though the guess ran twice.
    assert (await pipeline.queues.notify.counts()).pending == 2


async def test_a_paused_player_waits_and_the_others_are_scored(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter)
    paused, other = await new_players(store, minter, 2)
    assert await pipeline.guesses.pause(paused)
    assert not await pipeline.guesses.pause(paused)

    runs = Runs(pipeline, "score")
    async with serving([pipeline.score_consumer(ConsumerOptions(concurrency=2, beat=0.2))]):
        for player in (paused, paused, other):
            await pipeline.guesses.submit(game.id, player, "🍎🍌🍒🐸🐙🦋")
        await until(lambda: runs.reached(1))
        await asyncio.sleep(0.1)  # the paused lane is not served meanwhile
        assert [run.player for run in runs.results] == [other]
        assert await pipeline.guesses.depth(paused) == 2

        assert await pipeline.guesses.resume(paused)
        await until(lambda: runs.reached(3))
    assert await pipeline.guesses.depth(paused) == 0


async def test_a_scored_event_names_the_player_and_percentage_only(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter)
    (player,) = await new_players(store, minter, 1)
    async with pipeline.queues.score.subscribe() as events:
        receipt = await pipeline.guesses.submit(game.id, player, "🍌🍎🍒🐸🐙🦋")
        async with serving([pipeline.score_consumer(ConsumerOptions(beat=0.2))]):
            while (event := await asyncio.wait_for(events.get(), 5))["event"] != "scored":
                pass

    assert event == {
        "event": "scored",
        "job": receipt.job,
        "game": game.id,
        "player": player,
        "percent": 43,  # 80 + 80 + 100 = 260 of 600; 🐸🐙🦋 are not in the secret
    }


async def test_the_periodic_sweep_rescues_a_lost_enqueue_without_being_called(
    store: Store, pipeline: Pipeline, minter: Minter, valkey_url: str
) -> None:
    _, player, _ = await charged_but_not_enqueued(store, pipeline, minter, valkey_url)
    score_queue = pipeline.queues.score

    sweeping = asyncio.ensure_future(pipeline.sweep_forever(every=0.05, older_than=0))
    try:
        async with serving([pipeline.score_consumer(ConsumerOptions(concurrency=1, beat=0.2))]):
            await until(lambda: _all_scored(store, score_queue))
    finally:
        sweeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeping
    assert await ledger_count(store, "guess") == {player: 1}

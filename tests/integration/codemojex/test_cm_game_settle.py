"""Closing a game against real Valkey, real consumers and a real database: a perfect score
racing the timer pays exactly once, ties split the pool evenly, the timer sweep asks once, and
a settlement that fails after its commit is finished without paying twice.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from test_cm_game_rig import (  # noqa: F401 (fixtures register by import)
    SECRET,
    Runs,
    ledger_count,
    minter_fixture,
    new_game,
    new_players,
    pipeline_fixture,
    store_fixture,
    unscored,
    until,
)

from codemojex.game.api import CloseReason
from codemojex.game.settle import PRIZE_REASON, SettleOutcome, SettleWorker
from codemojex.notify.api import Notifier
from codemojex.pipeline import Pipeline, serving
from codemojex.store import (
    GameStatus,
    RoomKind,
    Store,
    balances,
    current_game,
    game_view,
)
from echomq import ConsumerOptions, Fixed, Job, Queue, Verdict
from echomq.engine import Empty, Minter

FAST = ConsumerOptions(concurrency=4, beat=0.1, backoff=Fixed(0.05))


async def score_everything(pipeline: Pipeline) -> None:
    async with serving([pipeline.score_consumer(FAST)]):
        await until(lambda: _no_unscored(pipeline))


async def _no_unscored(pipeline: Pipeline) -> bool:
    counts = await pipeline.queues.score.counts()
    return counts.pending == counts.active == 0 and await unscored(pipeline.store) == 0


async def settle_everything(
    pipeline: Pipeline, consumers: int = 1, settler: SettleWorker | None = None
) -> None:
    settle = pipeline.queues.settle
    runners = [pipeline.settle_consumer(FAST, settler=settler) for _ in range(consumers)]

    async def idle() -> bool:
        counts = await settle.counts()
        return counts.pending == counts.active == counts.scheduled == 0

    async with serving(runners):
        await until(idle)


async def notifications(queue: Queue) -> list[dict[str, Any]]:
    """Every notification waiting on ``cm.notify`` (claimed and completed here)."""
    payloads = []
    while not isinstance(job := await queue.claim(), Empty):
        assert isinstance(job, Job)
        payloads.append(job.payload["args"])  # the notify task's arguments
        await queue.complete(job)
    return payloads


async def test_a_perfect_score_racing_the_timer_pays_exactly_once(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter, kind=RoomKind.PAID, chat=-200)
    cracker, other = await new_players(store, minter, 2, keys=3)
    await pipeline.queues.settle.pause()  # let every close request pile up, then race them
    await pipeline.guesses.submit(game.id, other, "🍎🍌🍒🍇🐶🦊")
    await pipeline.guesses.submit(game.id, cracker, "".join(SECRET))
    await score_everything(pipeline)  # the 600 asks for the close

    assert await pipeline.closer.sweep(now=game.deadline + timedelta(seconds=1)) == 0  # dedup
    for _ in range(6):  # closes that got past the dedup (another deployment, an expired key)
        await pipeline.tasks.settle.enqueue(game.id, "timer")
    assert (await pipeline.queues.settle.counts()).pending == 7
    runs = Runs(pipeline, "settle")
    await pipeline.queues.settle.resume()
    await settle_everything(pipeline, consumers=3)

    outcomes = Counter(run.outcome for run in runs.results)
    assert outcomes[SettleOutcome.CLOSED] == 1
    assert sum(outcomes.values()) == 7
    (closed,) = [run for run in runs.results if run.outcome is SettleOutcome.CLOSED]
    assert (dict(closed.shares), closed.top_score) == ({cracker: 2}, 600)  # the pool: 2 fees
    assert await ledger_count(store, PRIZE_REASON) == {cracker: 1}
    async with store.read() as session:
        view = await game_view(session, game.id)
        assert (await balances(session, cracker)).diamonds == 2
        assert (await balances(session, other)).diamonds == 0
        assert await current_game(session, game.room) is None
    assert (view.status, view.winners, view.top_score) == (GameStatus.CLOSED, (cracker,), 600)

    texts = [note["text"] for note in await notifications(pipeline.queues.notify)]
    assert [text for text in texts if text.startswith("🏁")] == [
        "🏁 Game over! Top score 100%: P0 +2 💎. Send /play to start another."
    ]
    assert any(text.startswith("🎉 P0 cracked the code!") for text in texts)
    closing = [text for text in texts if text.startswith("🏁")]
    assert all("🍎" not in text for text in closing)  # the result never shows the secret


async def test_the_timer_closes_a_tie_and_splits_the_pool_evenly(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter, kind=RoomKind.PAID, pool=4)
    first, second, third = await new_players(store, minter, 3, keys=2)
    for player, guess in (
        (first, "🍎🍌🍒🍇🦊🐶"),
        (second, "🍎🍌🍒🍇🦊🐶"),
        (third, "🍌🍎🎸🎲🚀🚲"),
    ):
        await pipeline.guesses.submit(game.id, player, guess)
    await score_everything(pipeline)
    assert [(row.player, row.total) for row in await pipeline.board.top(game.id)] == [
        (first, 480),
        (second, 480),
        (third, 160),
    ]

    later = game.deadline + timedelta(seconds=1)
    assert await pipeline.closer.sweep(now=game.deadline - timedelta(seconds=1)) == 0
    assert await pipeline.closer.sweep(now=later) == 1
    assert await pipeline.closer.sweep(now=later) == 0  # the first request is still waiting
    runs = Runs(pipeline, "settle")
    await settle_everything(pipeline)
    assert await pipeline.closer.sweep(now=later) == 0  # closed: nothing expired is open

    (run,) = runs.results
    assert (run.outcome, dict(run.shares), run.top_score) == (
        SettleOutcome.CLOSED,
        {first: 4, second: 3},  # 4 + 3 fees = 7: the odd diamond goes to the older player
        480,
    )
    async with store.read() as session:
        diamonds = [(await balances(session, p)).diamonds for p in (first, second, third)]
        view = await game_view(session, game.id)
    assert diamonds == [4, 3, 0]
    assert (view.winners, view.top_score) == ((first, second), 480)


async def test_a_game_without_scored_guesses_closes_with_no_winner(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter, chat=-300)
    assert await pipeline.closer.sweep(now=game.deadline) == 1
    runs = Runs(pipeline, "settle")
    await settle_everything(pipeline)

    assert [(run.outcome, run.top_score) for run in runs.results] == [(SettleOutcome.CLOSED, None)]
    async with store.read() as session:
        view = await game_view(session, game.id)
        assert await current_game(session, game.room) is None
    assert (view.status, view.winners) == (GameStatus.CLOSED, ())
    (note,) = await notifications(pipeline.queues.notify)
    assert (note["chat"], note["text"]) == (
        -300,
        "🏁 Game over: no guess was scored. Send /play to start another.",
    )
    assert note["notification"].startswith("NOT")


class FlakyNotifier(Notifier):
    """Fails its first notification: the settlement has committed but not announced."""

    failures = 1

    async def notify(self, chat: int, text: str, *, dedup_key: str | None = None) -> Verdict:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("injected: the notifier is down")
        return await super().notify(chat, text, dedup_key=dedup_key)


async def test_a_settlement_that_fails_after_its_commit_announces_without_paying_twice(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter, kind=RoomKind.PAID, pool=5)
    (winner,) = await new_players(store, minter, 1, keys=1)
    await pipeline.guesses.submit(game.id, winner, "🍎🍌🍒🍇🦊🐶")
    await score_everything(pipeline)
    worker = SettleWorker(
        store, pipeline.board, FlakyNotifier(pipeline.tasks.notify, minter), minter
    )
    runs = Runs(pipeline, "settle")
    assert await pipeline.closer.sweep(now=game.deadline) == 1
    await settle_everything(pipeline, settler=worker)

    # The failed attempt committed the payout (it raised, so it recorded nothing here); its retry
    # holds the same lock, finds the game settled and only announces it.
    assert [run.outcome for run in runs.results] == [SettleOutcome.ALREADY_CLOSED]
    assert await ledger_count(store, PRIZE_REASON) == {winner: 1}
    async with store.read() as session:
        assert (await balances(session, winner)).diamonds == 6
    texts = [note["text"] for note in await notifications(pipeline.queues.notify)]
    assert texts[-1] == "🏁 Game over! Top score 80%: P0 +6 💎. Send /play to start another."


async def test_a_close_that_gets_past_a_lost_lock_pays_nothing(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    game = await new_game(store, minter, kind=RoomKind.PAID, pool=3)
    (winner,) = await new_players(store, minter, 1, keys=1)
    await pipeline.guesses.submit(game.id, winner, "🍎🍌🍒🍇🦊🐶")
    await score_everything(pipeline)
    runs = Runs(pipeline, "settle")
    await pipeline.closer.request(game.id, CloseReason.TIMER)
    await settle_everything(pipeline)
    await pipeline.board.wire.call("DEL", pipeline.keyspace.game.close_lock(game.id))
    await pipeline.tasks.settle.enqueue(game.id)  # no dedup key
    await settle_everything(pipeline)

    assert [run.outcome for run in runs.results] == [
        SettleOutcome.CLOSED,
        SettleOutcome.ALREADY_CLOSED,
    ]
    assert await ledger_count(store, PRIZE_REASON) == {winner: 1}
    async with store.read() as session:
        assert (await balances(session, winner)).diamonds == 4


async def test_a_close_of_an_unknown_game_is_dead_lettered_at_once(
    store: Store, pipeline: Pipeline, minter: Minter
) -> None:
    await pipeline.tasks.settle.enqueue(minter.mint("GAM"))
    await settle_everything(pipeline)

    (dead,) = await pipeline.queues.settle.dead()
    assert dead.attempts == 1
    assert "no game GAM" in (dead.last_error or "")

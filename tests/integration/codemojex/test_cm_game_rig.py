"""The rig the game tests share (no tests of its own): a :class:`Pipeline` per test on the
session's Valkey (queues and keys under the test's own prefix, deleted afterwards) and the
store of ``cm_store_fixtures``; helpers to start games, make players and wait for the workers.

Test modules import ``pipeline_fixture`` (it registers as ``pipeline``) with the store fixtures.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cm_store_fixtures import minter_fixture, store_fixture  # noqa: F401 (fixtures register)
from sqlalchemy import func, select

from codemojex.domain import FREE_ROOM_FEE, PAID_ROOM_FEE, Currency
from codemojex.game.api import Receipt
from codemojex.pipeline import Pipeline
from codemojex.store import (
    GameView,
    RoomKind,
    Store,
    create_game,
    credit,
    ensure_player,
    ensure_room,
)
from codemojex.store.models import GuessRow, LedgerRow
from echomq import ConnectionOptions, Context, TaskOutcome
from echomq.engine import Minter
from echomq.wire import Pool

SECRET = ("🍎", "🍌", "🍒", "🍇", "🐶", "🐱")
"""The secret of every test game, on the ``classic`` keyboard."""


@pytest.fixture(name="pipeline")
async def pipeline_fixture(
    store: Store, minter: Minter, valkey_url: str, queue_name: str
) -> AsyncIterator[Pipeline]:
    """The game's pipeline on a pool of its own, under the test's queue name."""
    pool = await Pool(ConnectionOptions.from_url(valkey_url), 2).connect()
    prefix = f"{queue_name}."
    built = Pipeline.build(store, pool, minter=minter, prefix=prefix)
    try:
        yield built
    finally:
        await built.forget()  # the queues and every key the keyspace names
        await pool.close()


async def new_game(
    store: Store,
    minter: Minter,
    *,
    chat: int = -100,
    kind: RoomKind = RoomKind.FREE,
    deadline: datetime | None = None,
    pool: int = 0,
) -> GameView:
    """A game with :data:`SECRET` on the ``classic`` keyboard in a new room of chat ``chat``."""
    fee = PAID_ROOM_FEE if kind is RoomKind.PAID else FREE_ROOM_FEE
    async with store.transaction() as session:
        room = await ensure_room(session, chat, kind, "classic", minter)
        game = await create_game(
            session,
            room.id,
            "classic",
            SECRET,
            deadline or datetime.now(UTC) + timedelta(hours=1),
            fee,
            minter=minter,
            pool=pool,
        )
    assert game is not None
    return game


async def new_players(
    store: Store, minter: Minter, count: int, *, first: int = 5000, keys: int = 0, clips: int = 0
) -> list[str]:
    """``count`` players (with the starting grant, plus ``keys`` and ``clips`` when given)."""
    players = []
    async with store.transaction() as session:
        for n in range(count):
            player = (await ensure_player(session, first + n, f"P{n}", minter)).id
            for currency, amount in ((Currency.KEYS, keys), (Currency.CLIPS, clips)):
                if amount:
                    await credit(session, player, currency, amount, "top-up", minter=minter)
            players.append(player)
    return players


IN_FLIGHT = 10
"""Submits a burst keeps in flight at once: below the store's pool (5 + 10 overflow), as the
command worker's concurrency keeps a real burst. Thousands awaited at once would queue for a
connection past the pool's 30 s timeout on a loaded host, which tests the host, not the game."""


async def submit_all(calls: Iterable[Awaitable[Receipt]]) -> list[Receipt]:
    """Await ``calls`` with :data:`IN_FLIGHT` of them running at a time; receipts in order."""
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def gated(call: Awaitable[Receipt]) -> Receipt:
        async with gate:
            return await call

    return await asyncio.gather(*(gated(call) for call in calls))


async def until(condition: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:
    """Wait until ``condition`` holds (the workers' progress has no event to wait on)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, "the condition never held"
        await asyncio.sleep(0.02)


async def unscored(store: Store) -> int:
    """How many recorded guesses have no score yet."""
    async with store.read() as session:
        query = select(func.count()).select_from(GuessRow).where(GuessRow.score_total.is_(None))
        return int(await session.scalar(query) or 0)


async def ledger_count(store: Store, reason: str, players: Sequence[str] = ()) -> dict[str, int]:
    """Ledger rows of ``reason`` per player (only ``players`` when given)."""
    query = (
        select(LedgerRow.player_id, func.count())
        .where(LedgerRow.reason == reason)
        .group_by(LedgerRow.player_id)
    )
    if players:
        query = query.where(LedgerRow.player_id.in_(players))
    async with store.read() as session:
        return {row[0]: int(row[1]) for row in await session.execute(query)}


class Runs:
    """What each run of one of the pipeline's tasks returned, in the order they finished: an
    ``after_job`` hook of the pipeline's app, as any echomq application observes its tasks."""

    def __init__(self, pipeline: Pipeline, task: str) -> None:
        self.task = task
        self.results: list[Any] = []
        pipeline.app.after_job(self._record)

    async def _record(self, run: Context, outcome: TaskOutcome) -> None:
        if run.task == self.task and outcome.ok:
            self.results.append(outcome.result)

    async def reached(self, count: int) -> bool:
        return len(self.results) >= count

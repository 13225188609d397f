"""Putting a flood plan into the store (players with enough clips, rooms, open games) and taking
a run's queues and keys off Valkey afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from codemojex.domain import FREE_ROOM_FEE, Currency
from codemojex.flood.scenario import KEYBOARD, Plan, RoomPlan
from codemojex.pipeline import Pipeline
from codemojex.store import RoomKind, Store, create_game, credit, ensure_player, ensure_room
from codemojex.store.models import GuessRow

DEADLINE_MARGIN = 1.5
"""Seconds a quiet game outlives its players' last guess, so the timer, not a refusal, ends it."""

LOUD_GAME_LIFETIME = timedelta(hours=1)
"""The loud game is closed by its cracking guess, well before this."""


@dataclass(frozen=True, slots=True)
class Seeded:
    """The store's ids for the plan: ``PLR`` per Telegram user, ``GAM`` per room label."""

    players: dict[int, str]
    games: dict[str, str]
    room_of_game: dict[str, RoomPlan]


async def seed(plan: Plan, pipeline: Pipeline) -> Seeded:
    """Create the plan's players (each able to pay every guess), rooms and games.

    The quiet games' deadline is ``duration`` + :data:`DEADLINE_MARGIN` from now, so start
    playing at once after this returns.
    """
    minter = pipeline.minter
    players: dict[int, str] = {}
    async with pipeline.store.transaction() as session:
        for room in plan.rooms:
            for member in room.players:
                player = await ensure_player(session, member.user, member.name, minter)
                needed = len(member.guesses) + 1  # the cracking guess may be theirs
                await credit(session, player.id, Currency.CLIPS, needed, "flood", minter=minter)
                players[member.user] = player.id
    games: dict[str, str] = {}
    room_of_game: dict[str, RoomPlan] = {}
    now = datetime.now(UTC)
    async with pipeline.store.transaction() as session:
        for room in plan.rooms:
            lifetime = (
                LOUD_GAME_LIFETIME
                if room.is_loud
                else timedelta(seconds=plan.options.duration + DEADLINE_MARGIN)
            )
            row = await ensure_room(session, room.chat, RoomKind.FREE, KEYBOARD, minter)
            game = await create_game(
                session, row.id, KEYBOARD, room.secret, now + lifetime, FREE_ROOM_FEE,
                minter=minter,
            )  # fmt: skip
            if game is None:
                raise RuntimeError(f"room {room.label} already has an open game")
            games[room.label] = game.id
            room_of_game[game.id] = room
    return Seeded(players, games, room_of_game)


async def unscored_count(store: Store) -> int:
    """How many recorded guesses have no score yet."""
    async with store.read() as session:
        query = select(func.count()).select_from(GuessRow).where(GuessRow.score_total.is_(None))
        return int(await session.scalar(query) or 0)


async def discard_run(pipeline: Pipeline) -> None:
    """Delete the run's queues and keys (the pipeline's own, its notify buckets included)."""
    await pipeline.forget()

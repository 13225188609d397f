"""Rooms and games in the system of record: starting a game in a waiting room, the players'
view of a game (which has no secret to leak), and closing a game exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Row, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.domain import CodeError, Currency, EconomyError, Fee
from codemojex.store._sql import checked_id, insert_new, utc_now
from codemojex.store.errors import NotFound
from codemojex.store.models import GameRow, GameStatus, RoomKind, RoomRow, RoomStatus
from echomq.engine import Minter


@dataclass(frozen=True, slots=True)
class Room:
    """A Telegram chat where games run."""

    id: str
    telegram_chat_id: int
    kind: RoomKind
    emoji_set: str
    status: RoomStatus


@dataclass(frozen=True, slots=True)
class GameView:
    """A game as players may see it. It has no field for the secret, so no view can leak it.

    ``winners`` and ``top_score`` are empty until the settlement records them.
    """

    id: str
    room: str
    keyboard: str
    deadline: datetime
    fee: Fee
    pool: int
    status: GameStatus
    winners: tuple[str, ...]
    top_score: int | None
    created_at: datetime
    closed_at: datetime | None

    @property
    def is_open(self) -> bool:
        """Whether the game is still open (it may be past its deadline, awaiting the sweep)."""
        return self.status is GameStatus.OPEN


# Every column a player-facing read selects: all but ``secret``, listed so none is added by chance.
_VIEW_COLUMNS: Final = (
    GameRow.id,
    GameRow.room_id,
    GameRow.keyboard,
    GameRow.deadline,
    GameRow.fee_currency,
    GameRow.fee_amount,
    GameRow.pool,
    GameRow.status,
    GameRow.winners,
    GameRow.top_score,
    GameRow.created_at,
    GameRow.closed_at,
)


async def ensure_room(
    session: AsyncSession,
    telegram_chat_id: int,
    kind: RoomKind,
    emoji_set: str,
    minter: Minter,
    *,
    now: datetime | None = None,
) -> Room:
    """The room of chat ``telegram_chat_id``, created ``waiting`` if there is none yet.

    Idempotent by chat id (also under concurrent callers); ``kind`` and ``emoji_set`` are only
    used when the room is created.
    """
    values = {
        "id": minter.mint("ROM"),
        "telegram_chat_id": telegram_chat_id,
        "kind": RoomKind(kind),
        "emoji_set": emoji_set,
        "status": RoomStatus.WAITING,
        "created_at": utc_now(now),
    }
    await session.execute(insert_new(session, RoomRow, "telegram_chat_id", values))
    row = (
        await session.execute(
            select(
                RoomRow.id,
                RoomRow.telegram_chat_id,
                RoomRow.kind,
                RoomRow.emoji_set,
                RoomRow.status,
            ).where(RoomRow.telegram_chat_id == telegram_chat_id)
        )
    ).one()
    return Room(
        id=row.id,
        telegram_chat_id=row.telegram_chat_id,
        kind=row.kind,
        emoji_set=row.emoji_set,
        status=row.status,
    )


async def create_game(
    session: AsyncSession,
    room: str,
    keyboard: str,
    secret: Sequence[str],
    deadline: datetime,
    fee: Fee,
    *,
    minter: Minter,
    pool: int = 0,
    now: datetime | None = None,
) -> GameView | None:
    """Start a game in ``room`` if it is waiting, and return the players' view of it.

    ``None`` when the room already has a game (the room flips waiting→playing in one conditional
    UPDATE, so two concurrent starts make one game). The fee must be clips in a free room and
    keys in a paid one (:class:`EconomyError`); ``pool`` is the seed of a paid room's prize.
    """
    room = checked_id(room, "ROM", "room")
    if not secret or not all(isinstance(symbol, str) and symbol for symbol in secret):
        raise CodeError("secret", "empty", "a secret is a non-empty sequence of symbols")
    if pool < 0:
        raise EconomyError("pool", pool, "negative", "a prize pool is 0 or more")
    kind = await session.scalar(select(RoomRow.kind).where(RoomRow.id == room))
    if kind is None:
        raise NotFound("room", room)
    wanted = Currency.KEYS if kind is RoomKind.PAID else Currency.CLIPS
    if fee.currency is not wanted:
        raise EconomyError("fee", fee, "fee_currency", f"a {kind.value} room charges {wanted}")
    started = await session.scalar(
        update(RoomRow)
        .where(RoomRow.id == room, RoomRow.status == RoomStatus.WAITING)
        .values(status=RoomStatus.PLAYING)
        .returning(RoomRow.id)
        .execution_options(synchronize_session=False)
    )
    if started is None:
        return None
    game = minter.mint("GAM")
    await session.execute(
        insert(GameRow).values(
            id=game,
            room_id=room,
            keyboard=keyboard,
            secret=json.dumps(list(secret), ensure_ascii=False),
            deadline=deadline,
            fee_currency=fee.currency,
            fee_amount=fee.amount,
            pool=pool,
            status=GameStatus.OPEN,
            created_at=utc_now(now),
        )
    )
    return await game_view(session, game)


async def game_view(session: AsyncSession, game: str) -> GameView:
    """The players' view of ``game`` (:class:`NotFound` if there is none)."""
    game = checked_id(game, "GAM", "game")
    row = (await session.execute(select(*_VIEW_COLUMNS).where(GameRow.id == game))).one_or_none()
    if row is None:
        raise NotFound("game", game)
    return _view(row)


async def current_game(session: AsyncSession, room: str) -> GameView | None:
    """The open game of ``room``, or ``None`` while the room waits."""
    room = checked_id(room, "ROM", "room")
    row = (
        await session.execute(
            select(*_VIEW_COLUMNS)
            .where(GameRow.room_id == room, GameRow.status == GameStatus.OPEN)
            .order_by(GameRow.id.desc())
            .limit(1)
        )
    ).one_or_none()
    return None if row is None else _view(row)


async def game_secret(session: AsyncSession, game: str) -> tuple[str, ...]:
    """The secret of ``game``, for the score worker only: never hand it to a player."""
    game = checked_id(game, "GAM", "game")
    text = await session.scalar(select(GameRow.secret).where(GameRow.id == game))
    if text is None:
        raise NotFound("game", game)
    return tuple(json.loads(text))


async def close_game(session: AsyncSession, game: str, *, now: datetime | None = None) -> bool:
    """Close ``game`` and put its room back to waiting; ``True`` only for the call that closed it.

    One conditional UPDATE (``… WHERE status = 'open'``) decides, so of any number of concurrent
    callers (a perfect score racing the timer) exactly one gets ``True``.
    """
    game = checked_id(game, "GAM", "game")
    room = await session.scalar(
        update(GameRow)
        .where(GameRow.id == game, GameRow.status == GameStatus.OPEN)
        .values(status=GameStatus.CLOSED, closed_at=utc_now(now))
        .returning(GameRow.room_id)
        .execution_options(synchronize_session=False)
    )
    if room is None:
        if await session.scalar(select(GameRow.id).where(GameRow.id == game)) is None:
            raise NotFound("game", game)
        return False
    await session.execute(
        update(RoomRow)
        .where(RoomRow.id == room)
        .values(status=RoomStatus.WAITING)
        .execution_options(synchronize_session=False)
    )
    return True


async def expired_games(session: AsyncSession, now: datetime | None = None) -> tuple[str, ...]:
    """The open games whose deadline has passed, oldest first: the timer sweep closes these."""
    ids = await session.scalars(
        select(GameRow.id)
        .where(GameRow.status == GameStatus.OPEN, GameRow.deadline <= utc_now(now))
        .order_by(GameRow.id)
    )
    return tuple(ids)


async def record_winners(
    session: AsyncSession, game: str, winners: Sequence[str], top_score: int
) -> bool:
    """Write the winners and top score of a closed ``game``; ``True`` only the first time.

    Refused with :class:`NotFound` if no closed game has that id.
    """
    game = checked_id(game, "GAM", "game")
    players = [checked_id(player, "PLR", "winner") for player in winners]
    recorded = await session.scalar(
        update(GameRow)
        .where(GameRow.id == game, GameRow.status == GameStatus.CLOSED, GameRow.winners.is_(None))
        .values(winners=json.dumps(players), top_score=top_score)
        .returning(GameRow.id)
        .execution_options(synchronize_session=False)
    )
    if recorded is not None:
        return True
    status = await session.scalar(select(GameRow.status).where(GameRow.id == game))
    if status is not GameStatus.CLOSED:
        raise NotFound("closed game", game)
    return False


def _view(row: Row[*tuple[Any, ...]]) -> GameView:
    return GameView(
        id=row.id,
        room=row.room_id,
        keyboard=row.keyboard,
        deadline=row.deadline,
        fee=Fee(row.fee_currency, row.fee_amount),
        pool=row.pool,
        status=row.status,
        winners=tuple(json.loads(row.winners)) if row.winners is not None else (),
        top_score=row.top_score,
        created_at=row.created_at,
        closed_at=row.closed_at,
    )

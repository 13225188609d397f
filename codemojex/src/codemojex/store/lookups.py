"""Reads the game and the bot stages share: a room's chat, the players' display names, a
game's top scorers, and what the operators' dashboard calls a lane. Each takes the caller's
session.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.store.errors import NotFound
from codemojex.store.models import GuessRow, PlayerRow, RoomRow


@dataclass(frozen=True, slots=True)
class TopScore:
    """The best total scored in a game and every player who scored it (ascending ids)."""

    total: int
    players: tuple[str, ...]


async def room_chat(session: AsyncSession, room: str) -> int:
    """The Telegram chat id of ``room``."""
    chat = await session.scalar(select(RoomRow.telegram_chat_id).where(RoomRow.id == room))
    if chat is None:
        raise NotFound("room", room)
    return int(chat)


async def player_names(session: AsyncSession, players: Iterable[str]) -> dict[str, str]:
    """The display name of each of ``players`` that exists."""
    wanted = sorted(set(players))
    if not wanted:
        return {}
    rows = await session.execute(
        select(PlayerRow.id, PlayerRow.name).where(PlayerRow.id.in_(wanted))
    )
    return {row.id: row.name for row in rows}


@dataclass(frozen=True, slots=True)
class Contact:
    """What the game needs to address a player: the display name and the Telegram user id
    (their private chat with the bot)."""

    name: str
    telegram_id: int


async def contact(session: AsyncSession, player: str) -> Contact | None:
    """The name and Telegram id of ``player``, or ``None`` when no such player exists."""
    row = (
        await session.execute(
            select(PlayerRow.name, PlayerRow.telegram_id).where(PlayerRow.id == player)
        )
    ).first()
    return None if row is None else Contact(row.name, int(row.telegram_id))


async def top_score(session: AsyncSession, game: str) -> TopScore | None:
    """The top total among ``game``'s scored guesses and who scored it; ``None`` if none is."""
    best = await session.scalar(
        select(func.max(GuessRow.score_total)).where(
            GuessRow.game_id == game, GuessRow.score_total.is_not(None)
        )
    )
    if best is None:
        return None
    players = await session.scalars(
        select(GuessRow.player_id)
        .where(GuessRow.game_id == game, GuessRow.score_total == best)
        .group_by(GuessRow.player_id)
        .order_by(GuessRow.player_id)
    )
    return TopScore(int(best), tuple(players))


async def lane_labels(session: AsyncSession, lanes: Iterable[str]) -> dict[str, str]:
    """What an operator should read for each lane it knows: a player's lane (``PLR`` id) or a
    private chat (their Telegram id) by the player's name, a group's chat by its room."""
    wanted = list(dict.fromkeys(lanes))
    players = [lane for lane in wanted if lane.startswith("PLR")]
    chats = [int(lane) for lane in wanted if lane.lstrip("-").isdigit() and len(lane) < 20]
    labels = await player_names(session, players)
    if chats:
        for telegram_id, name in await session.execute(
            select(PlayerRow.telegram_id, PlayerRow.name).where(PlayerRow.telegram_id.in_(chats))
        ):
            labels[str(telegram_id)] = f"{name} (private chat)"
        for chat, room, kind in await session.execute(
            select(RoomRow.telegram_chat_id, RoomRow.id, RoomRow.kind).where(
                RoomRow.telegram_chat_id.in_(chats)
            )
        ):
            labels.setdefault(str(chat), f"{kind.value} room {room}")
    return labels

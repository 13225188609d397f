"""What every command handler is given: the :class:`Services` (store, the game's and the
notifier's producer APIs, board, bot, the stage's Valkey keys, options), injected by the
dispatcher, plus the helpers they share to turn a Telegram user into a player and a chat into a
room.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiogram import Bot
from aiogram.types import Chat, User

from codemojex.domain import EmojiSet, draw_secret, get_set, room_fee
from codemojex.game.api import Guesses
from codemojex.keyspace import BotKeys
from codemojex.notify.api import Notifier
from codemojex.store import (
    Board,
    GameView,
    Player,
    Room,
    RoomKind,
    Store,
    create_game,
    current_game,
    ensure_player,
    ensure_room,
)
from codemojex.store.kv import Valkey
from codemojex.store.memo import Memo
from echomq.engine import Minter


@dataclass(frozen=True, slots=True)
class CommandOptions:
    """The command worker's settings. Durations are seconds.

    ``emoji_set`` is a new room's keyboard, ``round_length`` a new game's time to its deadline,
    ``seed_pool`` the diamonds a new game's winner takes, ``draft_ttl`` how long a half-composed
    guess is kept, ``seen_ttl`` how long a handled ``update_id`` is remembered (Telegram keeps
    an unconfirmed update for 24 hours).
    """

    emoji_set: str = "classic"
    round_length: float = 35 * 3600.0
    seed_pool: int = 10
    draft_ttl: float = 3600.0
    seen_ttl: float = 24 * 3600.0

    def __post_init__(self) -> None:
        get_set(self.emoji_set)  # refuses an unknown set now rather than at the first /play
        if self.round_length <= 0 or self.draft_ttl <= 0 or self.seen_ttl <= 0:
            raise ValueError("round_length, draft_ttl and seen_ttl are seconds > 0")
        if self.seed_pool < 0:
            raise ValueError("seed_pool is diamonds, 0 or more")


@dataclass(frozen=True, slots=True)
class Draft:
    """A guess being composed: the game it is for and the keyboard indexes picked so far."""

    game: str
    picks: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Services:
    """Everything a command handler may use; composed once by the application."""

    store: Store
    guesses: Guesses
    notifier: Notifier
    board: Board
    minter: Minter
    kv: Valkey
    bot: Bot
    keys: BotKeys
    options: CommandOptions = field(default_factory=CommandOptions)
    rng: random.Random = field(default_factory=random.SystemRandom)
    # A chat's room and a user's player never change once made (a room's status does, and is
    # not read from here): remembered, so a guess does not take SQLite's write lock to find them.
    _rooms: Memo[int, Room] = field(default_factory=lambda: Memo(4096), init=False, repr=False)
    _players: Memo[int, Player] = field(default_factory=lambda: Memo(16384), init=False, repr=False)

    async def reply(
        self,
        chat: int,
        text: str,
        *,
        markup: dict[str, Any] | None = None,
        edit: int | None = None,
    ) -> None:
        """Send ``text`` to ``chat`` through the notifier (rate limits and retries included)."""
        await self.notifier.notify(chat, text, markup=markup, edit=edit)

    async def player(self, user: User) -> Player:
        """The player of Telegram ``user``, created with the starting grant on first sight."""
        known = self._players.get(user.id)
        if known is not None:
            return known
        async with self.store.transaction() as session:
            player = await ensure_player(session, user.id, user.full_name, self.minter)
        return self._players.put(user.id, player)

    async def room(self, chat: Chat) -> Room:
        """The room of ``chat``, created waiting on first sight (its ``status`` is not kept fresh:
        ask :func:`~codemojex.store.current_game` whether a game runs)."""
        known = self._rooms.get(chat.id)
        if known is not None:
            return known
        async with self.store.transaction() as session:
            room = await ensure_room(
                session, chat.id, RoomKind.FREE, self.options.emoji_set, self.minter
            )
        return self._rooms.put(chat.id, room)

    async def open_game(self, chat: Chat) -> GameView | None:
        """The chat's open game, or ``None`` while its room waits."""
        room = await self.room(chat)
        async with self.store.read() as session:
            return await current_game(session, room.id)

    async def start_or_join(self, chat: Chat) -> tuple[GameView, bool]:
        """The chat's open game, started now if none runs; ``True`` when this call started it."""
        room = await self.room(chat)
        keyboard = get_set(room.emoji_set)
        async with self.store.transaction() as session:
            game = await current_game(session, room.id)
            if game is not None:
                return game, False
            started = await create_game(
                session,
                room.id,
                keyboard.name,
                draw_secret(keyboard, self.rng),
                datetime.now(UTC) + timedelta(seconds=self.options.round_length),
                room_fee(is_paid=room.kind is RoomKind.PAID),
                minter=self.minter,
                pool=self.options.seed_pool,
            )
            if started is not None:
                return started, True
            # Another start won the room between the read and the write: join that game.
            game = await current_game(session, room.id)
        if game is None:  # pragma: no cover - the winning start committed an open game
            raise RuntimeError(f"room {room.id} is playing but has no open game")
        return game, False

    # -- drafts on the inline keyboard ---------------------------------------------------------

    async def load_draft(self, chat: int, user: int) -> Draft | None:
        """The guess ``user`` is composing in ``chat``, if any."""
        raw = await self.kv.get(self.keys.draft(chat, user))
        if raw is None:
            return None
        data = json.loads(raw)
        return Draft(str(data["game"]), tuple(int(pick) for pick in data["picks"]))

    async def save_draft(self, chat: int, user: int, draft: Draft) -> None:
        """Keep ``draft`` for ``draft_ttl`` seconds."""
        body = json.dumps({"game": draft.game, "picks": list(draft.picks)})
        await self.kv.put(self.keys.draft(chat, user), body, self.options.draft_ttl)

    async def drop_draft(self, chat: int, user: int) -> None:
        """Forget the draft of ``user`` in ``chat``."""
        await self.kv.delete(self.keys.draft(chat, user))


def keyboard_of(game: GameView) -> EmojiSet:
    """The keyboard a game was started with."""
    return get_set(game.keyboard)

"""``/play``: the first one in a waiting chat starts a game (secret drawn, deadline set, the
seed pool on offer); later ones join it. Either way the reply explains the rules (the squares,
the clock, the clips) above the inline keyboard.
"""

from __future__ import annotations

from datetime import UTC, datetime

from aiogram import Router
from aiogram.filters import Command
from aiogram.types import Message

from codemojex.bot.context import Services
from codemojex.bot.routers.keyboard import compose_markup, compose_text
from codemojex.bot.routers.start import rules
from codemojex.store import GameView


def time_left(game: GameView, now: datetime | None = None) -> str:
    """The time until ``game``'s deadline, roughly (``35 h``, ``12 min``)."""
    seconds = (game.deadline - (now or datetime.now(UTC))).total_seconds()
    if seconds >= 2 * 3600:
        return f"{round(seconds / 3600)} h"
    return f"{max(1, round(seconds / 60))} min"


def router() -> Router:
    """``/play``."""
    routes = Router(name="play")

    @routes.message(Command("play", ignore_case=True))
    async def play(message: Message, services: Services) -> None:
        if message.from_user is None:
            return
        player = await services.player(message.from_user)
        game, is_new = await services.start_or_join(message.chat)
        prize = f" The winner takes {game.pool} 💎." if game.pool else ""
        if is_new:
            head = f"🎲 {player.name} started a new game! It ends in {time_left(game)}.{prize}"
        else:
            head = f"👋 {player.name} joined the game ({time_left(game)} left).{prize}"
        # One message: the rules, then the keyboard (its redraws keep the short legend).
        await services.reply(
            message.chat.id,
            f"{head}\n{rules(services.options)}\n\n"
            f"Send /guess and 6 emojis, or compose a guess below.\n{compose_text(game)}",
            markup=compose_markup(game),
        )

    return routes

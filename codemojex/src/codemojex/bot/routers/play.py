"""``/play``: the first one in a waiting chat starts a game (secret drawn, deadline set, the
seed pool on offer); later ones join it. Either way the reply is short: who, the clock, the
prize, one line of rules, the squares' legend once, and the inline keyboard (``/help`` has the
rules in full). The starter's own later ``/play`` says the game is on, not that they joined.
"""

from __future__ import annotations

from datetime import UTC, datetime

from aiogram import Router
from aiogram.filters import Command
from aiogram.types import Message

from codemojex.bot.context import Services
from codemojex.bot.routers.keyboard import compose_markup
from codemojex.domain import CODE_LENGTH, get_set, legend, unit
from codemojex.store import GameView


def time_left(game: GameView, now: datetime | None = None) -> str:
    """The time until ``game``'s deadline, roughly (``35 h``, ``12 min``)."""
    seconds = (game.deadline - (now or datetime.now(UTC))).total_seconds()
    if seconds >= 2 * 3600:
        return f"{round(seconds / 3600)} h"
    return f"{max(1, round(seconds / 60))} min"


def play_text(head: str, game: GameView) -> str:
    """``/play``'s reply: ``head``, one line of rules, the legend once, how to guess."""
    fee = f"{game.fee.amount} {unit(game.fee.amount, game.fee.currency)}"
    size = len(get_set(game.keyboard).symbols)
    return (
        f"{head}\n"
        f"Crack the code: {CODE_LENGTH} different emojis out of these {size}; a guess costs "
        f"{fee} (/help has the rules).\n"
        f"{legend(short=True)}\n"
        f"Tap {CODE_LENGTH} emojis, then ✅ (⌫ undo, ✖ clear), or send /guess and "
        f"{CODE_LENGTH} emojis."
    )


def router() -> Router:
    """``/play``."""
    routes = Router(name="play")

    @routes.message(Command("play", ignore_case=True))
    async def play(message: Message, services: Services) -> None:
        if message.from_user is None:
            return
        player = await services.player(message.from_user)
        game, is_new = await services.start_or_join(message.chat)
        starter = services.keys.starter(game.id)
        prize = f" The winner takes {game.pool} 💎." if game.pool else ""
        if is_new:
            ttl = services.options.round_length + 3600.0
            await services.kv.put(starter, player.id, ttl)
            head = f"🎲 {player.name} started a new game! It ends in {time_left(game)}.{prize}"
        elif await services.kv.get(starter) == player.id:
            head = f"🎲 Your game is on, {player.name}: {time_left(game)} left.{prize}"
        else:
            head = f"👋 {player.name} joined the game ({time_left(game)} left).{prize}"
        await services.reply(message.chat.id, play_text(head, game), markup=compose_markup(game))

    return routes

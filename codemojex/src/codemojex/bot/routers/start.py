"""``/start`` and ``/help``: what the game is and the commands that play it."""

from __future__ import annotations

from typing import Final

from aiogram import Router
from aiogram.filters import Command, CommandStart
from aiogram.types import Message

from codemojex.bot.context import CommandOptions, Services
from codemojex.domain import CODE_LENGTH, DAILY_CLIPS, get_set, legend


def rules(options: CommandOptions) -> str:
    """How the game is played: the code, the squares (from the domain's one legend), the clock
    and the clips, for a new room's keyboard and round length. ``/help`` and ``/play`` show it."""
    keyboard = len(get_set(options.emoji_set).symbols)
    hours = max(1, round(options.round_length / 3600))
    return (
        f"The secret code is {CODE_LENGTH} different emojis out of the {keyboard} on the "
        f"keyboard. Each guess is {CODE_LENGTH} different emojis too; each square says how "
        "close that emoji is:\n"
        f"{legend()}\n"
        f"A game runs {hours} hours. Crack the code (6 🟩) to win the prize pool; when the "
        "time runs out, the best score takes it (ties split it) and the code stays secret.\n"
        f"A guess in a free room costs 1 📎 clip. Out of clips? Once a day (UTC) you are topped "
        f"back up to {DAILY_CLIPS} clips when you next guess."
    )


COMMANDS: Final = (
    "/play: start this chat's game, or join it\n"
    "/guess 🍎🍌🍒🍇🐶🐱: guess (or just send 6 emojis; /guess alone opens a keyboard)\n"
    "/board: the game's best scores\n"
    "/me: your balances and best scores\n"
    "/convert N: turn N diamonds (a multiple of 10) into keys, 10 💎 = 1 🔑"
)

HELP: Final = f"Codemojex: crack the secret code of {CODE_LENGTH} emojis.\n{COMMANDS}\n\n"
"""The first part of ``/help``; :func:`rules` follows it."""


def router() -> Router:
    """``/start`` and ``/help``."""
    routes = Router(name="start")

    @routes.message(CommandStart(ignore_case=True))
    async def start(message: Message, services: Services) -> None:
        name = message.from_user.full_name if message.from_user else "there"
        await services.reply(
            message.chat.id, f"Welcome to Codemojex, {name}! 🧩\n{HELP}{rules(services.options)}"
        )

    @routes.message(Command("help", ignore_case=True))
    async def help_(message: Message, services: Services) -> None:
        await services.reply(message.chat.id, HELP + rules(services.options))

    return routes

"""``/start`` and ``/help``: what the game is and the commands that play it."""

from __future__ import annotations

from typing import Final

from aiogram import Router
from aiogram.filters import Command, CommandStart
from aiogram.types import Message

from codemojex.bot.context import Services

HELP: Final = (
    "Codemojex: crack the secret code of 6 emojis.\n"
    "/play: start this chat's game, or join it\n"
    "/guess 🍎🍌🍒🍇🐶🐱: guess (or just send 6 emojis; /guess alone opens a keyboard)\n"
    "/board: the game's best scores\n"
    "/me: your balances and best scores\n"
    "/convert N: turn N diamonds (a multiple of 10) into keys, 10 💎 = 1 🔑\n"
    "Each position scores 100 when right, less the further its emoji is from its place; "
    "600 cracks the code and wins the pool."
)


def router() -> Router:
    """``/start`` and ``/help``."""
    routes = Router(name="start")

    @routes.message(CommandStart())
    async def start(message: Message, services: Services) -> None:
        name = message.from_user.full_name if message.from_user else "there"
        await services.reply(message.chat.id, f"Welcome to Codemojex, {name}! 🧩\n{HELP}")

    @routes.message(Command("help"))
    async def help_(message: Message, services: Services) -> None:
        await services.reply(message.chat.id, HELP)

    return routes

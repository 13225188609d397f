"""The last router: an unknown command gets the list of commands; other text gets a hint in a
private chat and silence in a group (people talk there)."""

from __future__ import annotations

from aiogram import Bot, F, Router
from aiogram.types import Message

from codemojex.bot.context import Services

COMMANDS = "/play, /guess, /board, /me, /convert N, /help"


def router() -> Router:
    """Anything no other router took."""
    routes = Router(name="fallback")

    @routes.message(F.text.startswith("/"))
    async def unknown_command(message: Message, bot: Bot, services: Services) -> None:
        word, _, mention = (message.text or "/").split(maxsplit=1)[0].partition("@")
        if mention and mention.lower() != ((await bot.me()).username or "").lower():
            return  # a command for another bot in the group
        await services.reply(
            message.chat.id, f"I don't know the command {word}. Try one of: {COMMANDS}."
        )

    @routes.message(F.chat.type == "private")
    async def chatter(message: Message, services: Services) -> None:
        await services.reply(
            message.chat.id,
            f"To guess, send 6 emojis from the keyboard (or /guess). Commands: {COMMANDS}.",
        )

    return routes

"""Guessing: ``/guess`` followed by 6 emojis, or a bare message of emojis, is charged and queued
for scoring (the score worker tells the room how it did). ``/guess`` alone opens the inline
keyboard. Every refusal says what to do instead, listing the keyboard when the emojis were wrong.
"""

from __future__ import annotations

from aiogram import F, Router
from aiogram.filters import Command
from aiogram.types import Message

from codemojex.bot.context import Services
from codemojex.bot.routers.keyboard import compose_markup, compose_text
from codemojex.bot.routers.submit import NO_GAME, submit_guess


def looks_like_emojis(text: str) -> bool:
    """Whether a bare message reads as a guess attempt: no letters or digits, not a command."""
    body = text.strip()
    return bool(body) and not body.startswith("/") and not any(c.isalnum() for c in body)


def router() -> Router:
    """``/guess`` and bare emoji messages."""
    routes = Router(name="guess")

    @routes.message(Command("guess", ignore_case=True))
    async def guess(message: Message, services: Services, command_job: str) -> None:
        if message.from_user is None or message.text is None:
            return
        if not message.text.split(maxsplit=1)[1:]:
            game = await services.open_game(message.chat)
            if game is None:
                await services.reply(message.chat.id, NO_GAME)
                return
            await services.reply(message.chat.id, compose_text(game), markup=compose_markup(game))
            return
        await submit_guess(
            services,
            message.chat,
            message.from_user,
            message.text,
            command_job=command_job,
            message=message.message_id,
        )

    @routes.message(F.text.func(looks_like_emojis))
    async def bare_guess(message: Message, services: Services, command_job: str) -> None:
        if message.from_user is None or message.text is None:
            return
        await submit_guess(
            services,
            message.chat,
            message.from_user,
            message.text,
            command_job=command_job,
            message=message.message_id,
        )

    return routes

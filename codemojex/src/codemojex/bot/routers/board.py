"""``/board``: the best totals of the chat's open game, as percentages, best first."""

from __future__ import annotations

from aiogram import Router
from aiogram.filters import Command
from aiogram.types import Message

from codemojex.bot.context import Services
from codemojex.bot.routers.submit import NO_GAME
from codemojex.domain import MAX_TOTAL
from codemojex.store.lookups import player_names

BOARD_ROWS = 10


def router() -> Router:
    """``/board``."""
    routes = Router(name="board")

    @routes.message(Command("board", ignore_case=True))
    async def board(message: Message, services: Services) -> None:
        game = await services.open_game(message.chat)
        if game is None:
            await services.reply(message.chat.id, NO_GAME)
            return
        rows = await services.board.top(game.id, BOARD_ROWS)
        if not rows:
            await services.reply(message.chat.id, "🏆 No guess scored yet: be the first!")
            return
        async with services.store.read() as session:
            names = await player_names(session, [row.player for row in rows])
        lines = [
            f"{rank}. {names.get(row.player, row.player)}: {round(row.total * 100 / MAX_TOTAL)}%"
            for rank, row in enumerate(rows, start=1)
        ]
        await services.reply(message.chat.id, "🏆 Best scores\n" + "\n".join(lines))

    return routes

"""``/me``: the player's balances and best scores."""

from __future__ import annotations

from aiogram import Router
from aiogram.filters import Command
from aiogram.types import Message

from codemojex.bot.context import Services
from codemojex.domain import MAX_TOTAL, Currency, unit
from codemojex.store import balances
from codemojex.store.scores import best_scores


def router() -> Router:
    """``/me``."""
    routes = Router(name="me")

    @routes.message(Command("me", ignore_case=True))
    async def me(message: Message, services: Services) -> None:
        if message.from_user is None:
            return
        player = await services.player(message.from_user)
        async with services.store.read() as session:
            wallet = await balances(session, player.id)
            best = await best_scores(session, player.id)
        lines = [
            f"{player.name}: {wallet.clips} 📎 {unit(wallet.clips, Currency.CLIPS)}, "
            f"{wallet.keys} 🔑 {unit(wallet.keys, Currency.KEYS)}, "
            f"{wallet.diamonds} 💎 {unit(wallet.diamonds, Currency.DIAMONDS)}"
        ]
        if best:
            scores = ", ".join(f"{round(row.total * 100 / MAX_TOTAL)}%" for row in best)
            lines.append(f"Best scores: {scores}")
        else:
            lines.append("No scored guess yet: /play and guess!")
        await services.reply(message.chat.id, "\n".join(lines))

    return routes

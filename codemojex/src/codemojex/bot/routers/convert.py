"""``/convert N``: N diamonds (a positive multiple of 10) into N/10 keys, all or nothing. A bad N
or too few diamonds is refused with the reason, and no balance changes."""

from __future__ import annotations

from aiogram import Router
from aiogram.filters import Command, CommandObject
from aiogram.types import Message

from codemojex.bot.context import Services
from codemojex.domain import DIAMONDS_PER_KEY
from codemojex.store import InsufficientFunds
from codemojex.store.exchange import convert_diamonds

USAGE = (
    f"Usage: /convert N, where N is the diamonds to convert: a positive multiple of "
    f"{DIAMONDS_PER_KEY} ({DIAMONDS_PER_KEY} 💎 = 1 🔑)."
)


def parse_amount(args: str | None) -> int | str:
    """The diamonds ``/convert``'s argument asks for, or what is wrong with it."""
    if not args or not args.strip():
        return USAGE
    words = args.split()
    if len(words) > 1:
        return f"One number, please. {USAGE}"
    word = words[0]
    if not word.isascii() or not word.lstrip("-").isdigit():
        return f"{word!r} is not a whole number. {USAGE}"
    amount = int(word)
    if amount <= 0 or amount % DIAMONDS_PER_KEY:
        return f"Cannot convert {amount} diamonds. {USAGE}"
    return amount


def router() -> Router:
    """``/convert``."""
    routes = Router(name="convert")

    @routes.message(Command("convert", ignore_case=True))
    async def convert(
        message: Message, command: CommandObject, services: Services, command_job: str
    ) -> None:
        if message.from_user is None:
            return
        amount = parse_amount(command.args)
        if isinstance(amount, str):
            await services.reply(message.chat.id, amount)
            return
        player = await services.player(message.from_user)
        try:
            async with services.store.transaction() as session:
                # Once per command job: run again after a crash, it converts nothing twice.
                done = await convert_diamonds(
                    session, player.id, amount, minter=services.minter, job=command_job
                )
        except InsufficientFunds as error:
            await services.reply(
                message.chat.id,
                f"Not enough diamonds: you have {error.balance} 💎, converting needs {amount}. "
                "Nothing was converted.",
            )
            return
        await services.reply(
            message.chat.id,
            f"Converted {done.diamonds} 💎 into {done.keys} 🔑. You now have "
            f"{done.keys_now} 🔑 and {done.diamonds_left} 💎.",
        )

    return routes

"""Submitting a guess from Telegram: the chat's open game, the user's player, the charge; and the
reply for each refusal (the keyboard is listed when the emojis were wrong).
"""

from __future__ import annotations

from aiogram.types import Chat, User

from codemojex.bot.context import Services, keyboard_of
from codemojex.domain import CODE_LENGTH, Currency, GuessError, GuessProblem, unit
from codemojex.store import GameClosed, InsufficientFunds

NO_GAME = "No game is running in this chat. Send /play to start one."


async def submit_guess(
    services: Services,
    chat: Chat,
    user: User,
    text: str,
    *,
    command_job: str | None = None,
    message: int | None = None,
) -> bool:
    """Submit ``text`` as ``user``'s guess in ``chat``; reply with the refusal if there is one.

    ``command_job`` is the id of the command job handling the update: the guess is recorded
    under it, so the same update run again (a lease reaped after a crash) charges once.
    ``message``: the guess's message in a group, which the group's answer replies to.
    ``True`` when the guess was charged and queued.
    """
    game = await services.open_game(chat)
    if game is None:
        await services.reply(chat.id, NO_GAME)
        return False
    player = await services.player(user)
    try:
        receipt = await services.guesses.submit(
            game.id, player.id, text, job=command_job, message=message if chat.id < 0 else None
        )
    except GuessError as error:
        symbols = " ".join(keyboard_of(game).symbols)
        await services.reply(chat.id, f"{guess_problem(error)}\nThe keyboard: {symbols}")
        return False
    except InsufficientFunds as error:
        hint = (
            " Win diamonds and /convert them into keys."
            if error.currency is Currency.KEYS
            else " (/me shows your balances.)"
        )
        await services.reply(
            chat.id,
            f"{user.full_name}, not enough {error.currency.value}: you have {error.balance}, "
            f"a guess costs {error.amount} {unit(error.amount, error.currency)}.{hint}",
        )
        return False
    except GameClosed:
        await services.reply(chat.id, "This game is over. Send /play to start another.")
        return False
    if receipt.topped_up:
        await services.reply(
            chat.id,
            f"{user.full_name}, you were out of clips: today's allowance added "
            f"{receipt.topped_up} 📎 (once a day, UTC).",
        )
    return True


def guess_problem(error: GuessError) -> str:
    """What was wrong with a guess, for people."""
    if error.reason is GuessProblem.UNKNOWN_SYMBOL:
        return f"Not on this game's keyboard: {' '.join(error.unknown)}."
    if error.reason is GuessProblem.REPEATED:
        return (
            f"Each emoji at most once: {' '.join(error.unknown)} repeated. The code is "
            f"{CODE_LENGTH} different emojis, so a guess is too."
        )
    if error.reason is GuessProblem.EMPTY:
        return f"A guess is {CODE_LENGTH} emojis, e.g. /guess followed by {CODE_LENGTH} of them."
    return f"A guess is exactly {CODE_LENGTH} emojis; that was {error.found}."

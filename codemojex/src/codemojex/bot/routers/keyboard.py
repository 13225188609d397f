"""The inline emoji keyboard: a message with one button per emoji of the game's keyboard plus
⌫ (undo), ✖ (clear) and ✅ (submit). Each tap updates the tapper's draft (kept in Valkey per chat
and user) and answers the callback with the draft (a toast the tapper alone sees). Taps never
edit the keyboard message: an answer to a callback costs no send, where an edit per tap spent the
chat's budget (about one message a second) ahead of the score the guess is for, which then
waited seconds (issue 29.2). ✅ answers with the guess sent, to the tapper alone; its score is
the chat's answer (in a group, the live status: nobody reads a guess before it is scored).
An emoji picked twice is refused at the tap: the code's emojis are all different.

Callback data: ``k:<GAM id>:<index>`` picks the keyboard's emoji at ``index``; ``k:<GAM id>:del``,
``:clr`` and ``:go``. The game id makes a keyboard of a finished game refuse politely.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from aiogram import Bot, F, Router
from aiogram.exceptions import TelegramAPIError
from aiogram.types import CallbackQuery

from codemojex.bot.context import Draft, Services, keyboard_of
from codemojex.bot.routers.submit import submit_guess
from codemojex.domain import CODE_LENGTH, legend, unit
from codemojex.store import GameView

log = logging.getLogger("codemojex.commands")

PREFIX: Final = "k"
ROW: Final = 6
UNDO, CLEAR, SUBMIT = "del", "clr", "go"


def compose_text(game: GameView) -> str:
    """The keyboard message's text (a draft's progress answers as a toast, never an edit)."""
    fee = f"{game.fee.amount} {unit(game.fee.amount, game.fee.currency)}"
    return (
        f"Compose your guess: tap {CODE_LENGTH} emojis, then ✅. "
        f"(⌫ undo, ✖ clear; a guess costs {fee}.)\n"
        f"{legend(short=True)}"
    )


def compose_markup(game: GameView) -> dict[str, Any]:
    """The inline keyboard of ``game`` as a Bot API ``reply_markup`` object."""
    symbols = keyboard_of(game).symbols
    buttons = [
        {"text": symbol, "callback_data": f"{PREFIX}:{game.id}:{index}"}
        for index, symbol in enumerate(symbols)
    ]
    rows = [buttons[start : start + ROW] for start in range(0, len(buttons), ROW)]
    rows.append(
        [
            {"text": "⌫", "callback_data": f"{PREFIX}:{game.id}:{UNDO}"},
            {"text": "✖", "callback_data": f"{PREFIX}:{game.id}:{CLEAR}"},
            {"text": "✅ Guess", "callback_data": f"{PREFIX}:{game.id}:{SUBMIT}"},
        ]
    )
    return {"inline_keyboard": rows}


def progress(picks: int, shown: str) -> str:
    """A draft as its tapper's toast shows it: ``Your guess: 🍎🍌▫️▫️▫️▫️ (2/6)``."""
    return f"Your guess: {shown}{'▫️' * (CODE_LENGTH - picks)} ({picks}/{CODE_LENGTH})"


async def answer(bot: Bot, callback: CallbackQuery, text: str, *, alert: bool = False) -> None:
    """Answer the callback query directly (it expires within seconds: no queue for this one)."""
    try:
        await bot.answer_callback_query(callback.id, text=text[:200], show_alert=alert)
    except TelegramAPIError as error:
        log.info("answerCallbackQuery failed (the tap still counted): %s", error.message)


def _parse(data: str) -> tuple[str, str] | None:
    parts = data.split(":")
    if len(parts) != 3 or parts[0] != PREFIX:
        return None
    return parts[1], parts[2]


def router() -> Router:
    """Taps on the inline keyboard."""
    routes = Router(name="keyboard")

    @routes.callback_query(F.data.startswith(f"{PREFIX}:"))
    async def tap(callback: CallbackQuery, bot: Bot, services: Services, command_job: str) -> None:
        parsed = _parse(callback.data or "")
        message = callback.message
        if parsed is None or message is None:
            await answer(bot, callback, "This button is not mine.")
            return
        game_id, action = parsed
        chat, user = message.chat, callback.from_user
        game = await services.open_game(chat)
        if game is None or game.id != game_id:
            await answer(
                bot, callback, "That game is over. Send /play to start another.", alert=True
            )
            return
        symbols = keyboard_of(game).symbols
        draft = await services.load_draft(chat.id, user.id)
        if draft is None or draft.game != game.id:
            draft = Draft(game.id)
        picks = list(draft.picks)
        if action == SUBMIT:
            if len(picks) != CODE_LENGTH:
                await answer(
                    bot, callback, f"Pick {CODE_LENGTH} emojis first ({len(picks)} so far)."
                )
                return
            guess = "".join(symbols[pick] for pick in picks)
            is_sent = await submit_guess(services, chat, user, guess, command_job=command_job)
            # Dropped after the submit: a run again after a crash still finds the draft and
            # submits it under the same job, which charges nothing twice.
            await services.drop_draft(chat.id, user.id)
            # The toast confirms; the score (a message, or the group's status) answers. No edit:
            # the send budget goes to the score.
            await answer(
                bot, callback, f"Guess sent: {guess} 🎯" if is_sent else "Not sent: see the chat."
            )
            return
        if action == UNDO:
            picks = picks[:-1]
        elif action == CLEAR:
            picks = []
        elif action.isdigit() and int(action) < len(symbols):
            if len(picks) >= CODE_LENGTH:
                await answer(bot, callback, f"Already {CODE_LENGTH}: tap ✅ to send, or ⌫.")
                return
            if int(action) in picks:
                await answer(
                    bot,
                    callback,
                    f"{symbols[int(action)]} is in your guess already: the code's "
                    f"{CODE_LENGTH} emojis are all different.",
                )
                return
            picks.append(int(action))
        else:
            await answer(bot, callback, "This button is not mine.")
            return
        await services.save_draft(chat.id, user.id, Draft(game.id, tuple(picks)))
        shown = "".join(symbols[pick] for pick in picks)
        # The toast alone: no edit, so the chat's send budget stays for the score.
        await answer(bot, callback, progress(len(picks), shown))

    return routes

"""Every group guess gets a visible answer in the group (issue 29.1): the live status message
answers it, edited in place while it is near the bottom, and sent anew as a reply to the newest
guess once chatter has scrolled it away (one token either way, within the group's 20 a minute).
"""

from __future__ import annotations

from bot_rig import ADA, BOB, LOUNGE, bot_fixture, wait_for, wait_for_text  # noqa: F401

from codemojex.app import BotStack
from codemojex.notify.status import SCROLLED_AFTER
from codemojex.telegram.sandbox import Sandbox

LIVE = "🎯 Live scores"


def _guess(sandbox: Sandbox, user: int, emojis: str) -> int:
    """``user`` guesses in the lounge; the guess's message id."""
    return int(sandbox.say(user, "/guess " + emojis, chat=LOUNGE)["message"]["message_id"])


async def test_a_guess_after_chatter_is_answered_by_the_status_sent_anew_below_it(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(ADA, "/play", chat=LOUNGE)
    await wait_for_text(sandbox, LOUNGE, "Ada started a new game")
    ada_guess = _guess(sandbox, ADA, "🍎🍌🍒🍇🐶🦊")
    first = await wait_for_text(sandbox, LOUNGE, "Ada: 🍎🍌🍒🍇🐶🦊 → ")
    assert first.text.startswith(LIVE)
    assert first.reply_to == ada_guess  # the first answer quotes the guess it answers

    for n in range(SCROLLED_AFTER + 2):  # the room chats on: the status scrolls up
        sandbox.say(BOB, f"what a game, part {n}", chat=LOUNGE)
    bob_guess = _guess(sandbox, BOB, "🍌🍎🍒🍇🐶🦊")
    again = await wait_for(
        sandbox, LOUNGE, lambda m: m.text.startswith(LIVE) and "Bob: 🍌🍎🍒🍇🐶🦊 → " in m.text
    )
    assert again.message_id > bob_guess  # below the guess, not edited far above it
    assert again.reply_to == bob_guess
    assert "Ada: 🍎🍌🍒🍇🐶🦊 → " in again.text  # every player's line, as before

    # A guess right under the status: the status is edited in place, no new message.
    _guess(sandbox, ADA, "🍒🍌🍎🍇🐶🦊")
    await wait_for(
        sandbox,
        LOUNGE,
        lambda m: m.message_id == again.message_id and "Ada: 🍒🍌🍎🍇🐶🦊 → " in m.text,
    )
    assert sum(m.text.startswith(LIVE) for m in sandbox.messages(LOUNGE)) == 2

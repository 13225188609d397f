"""The inline emoji keyboard, tapped in the sandbox with the whole bot running: taps compose a
draft (kept per chat and user, shown in the tapper's toast, never by an edit that would spend the
chat's send budget), ⌫ undoes, ✅ submits it as a guess that is charged and scored, the keyboard
message never edited; a stale keyboard refuses politely."""

from __future__ import annotations

from bot_rig import (  # noqa: F401 (fixtures register)
    ADA,
    BOB,
    CY,
    LOUNGE,
    bot_fixture,
    secret_of,
    wait_for,
    wait_for_text,
)

from codemojex.app import BotStack
from codemojex.bot.context import Draft
from codemojex.store import balances, find_player
from codemojex.telegram.sandbox import Sandbox, SentMessage


def buttons(message: SentMessage) -> dict[str, str]:
    """The keyboard message's buttons: text -> callback data."""
    assert message.reply_markup is not None
    return {
        button["text"]: button["callback_data"]
        for row in message.reply_markup["inline_keyboard"]
        for button in row
    }


async def test_taps_compose_a_guess_and_submit_it(sandbox: Sandbox, bot: BotStack) -> None:
    sandbox.say(CY, "/play")
    board = await wait_for_text(sandbox, CY, "Cy started a new game")
    keys = buttons(board)
    assert len(keys) == 24 + 3
    secret = await secret_of(bot.pipeline.store, CY)

    for symbol in secret[:5]:
        sandbox.tap(CY, CY, board.message_id, keys[symbol])
    sandbox.tap(CY, CY, board.message_id, keys[secret[0]])  # picked already: refused at the tap
    sandbox.tap(CY, CY, board.message_id, keys["🔥" if "🔥" not in secret else "🌈"])
    sandbox.tap(CY, CY, board.message_id, keys["⌫"])  # undo the wrong sixth
    sandbox.say(CY, "/me")  # a marker on the chat's lane: handled after the taps
    await wait_for_text(sandbox, CY, "📎 clips")
    draft = await bot.services.load_draft(CY, CY)
    assert draft is not None
    assert [keys[secret[n]].split(":")[2] for n in range(5)] == [str(p) for p in draft.picks]
    sandbox.tap(CY, CY, board.message_id, keys[secret[5]])
    sandbox.tap(CY, CY, board.message_id, keys["✅ Guess"])

    await wait_for_text(sandbox, CY, "🎉 Cy cracked the code!")
    edited = next(m for m in sandbox.messages(CY) if m.message_id == board.message_id)
    assert edited.edits == 0  # taps and ✅ answered in toasts: no send spent before the score
    async with bot.pipeline.store.read() as session:
        player = await find_player(session, CY)
        assert player is not None
        assert (await balances(session, player.id)).clips == 99  # one guess, charged once


async def test_submitting_an_incomplete_draft_sends_nothing(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(CY, "/play")
    board = await wait_for_text(sandbox, CY, "Cy started a new game")
    keys = buttons(board)
    sandbox.tap(CY, CY, board.message_id, keys["🍎"])
    sandbox.tap(CY, CY, board.message_id, keys["✅ Guess"])
    sandbox.say(CY, "/me")  # a marker on the same lane: handled after both taps
    me = await wait_for_text(sandbox, CY, "📎 clips")
    assert "100 📎 clips" in me.text  # nothing was charged
    assert "No scored guess yet" in me.text


async def test_a_keyboard_of_a_finished_game_changes_nothing(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(CY, "/play")
    board = await wait_for_text(sandbox, CY, "Cy started a new game")
    keys = buttons(board)
    secret = await secret_of(bot.pipeline.store, CY)
    sandbox.say(CY, "/guess " + "".join(secret))
    await wait_for_text(sandbox, CY, "🏁 Game over!")
    sandbox.tap(CY, CY, board.message_id, keys["🍎"])
    sandbox.say(CY, "/board")
    await wait_for_text(sandbox, CY, "No game is running")
    assert bot.services.keys.draft(CY, CY)
    assert await bot.services.load_draft(CY, CY) is None


async def test_in_a_group_taps_spend_none_of_the_groups_sends(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(ADA, "/play", chat=LOUNGE)
    board = await wait_for_text(sandbox, LOUNGE, "Ada started a new game")
    keys = buttons(board)
    sandbox.tap(ADA, LOUNGE, board.message_id, keys["🦊"])
    sandbox.tap(BOB, LOUNGE, board.message_id, keys["🐙"])
    sandbox.tap(ADA, LOUNGE, board.message_id, keys["🦋"])
    sandbox.say(ADA, "/board", chat=LOUNGE)  # a marker on the group's lane, after the taps
    await wait_for_text(sandbox, LOUNGE, "No guess scored yet")
    keyboard = next(m for m in sandbox.messages(LOUNGE) if m.message_id == board.message_id)
    assert keyboard.edits == 0  # each tapper saw their draft in a toast; nobody else saw it
    # Each player composes a draft of their own.
    assert await bot.services.load_draft(LOUNGE, ADA) == Draft(game_of(keys), (6, 9))
    assert await bot.services.load_draft(LOUNGE, BOB) == Draft(game_of(keys), (8,))


def game_of(keys: dict[str, str]) -> str:
    """The game id the keyboard's buttons carry."""
    return keys["✅ Guess"].split(":")[1]

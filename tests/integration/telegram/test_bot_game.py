"""A scripted game end to end through the sandbox, with the whole bot running: two players
/play in a group, guess, one cracks the code with 600, both see the result, and the winner's
diamonds rise by the game's pool."""

from __future__ import annotations

from bot_rig import (  # noqa: F401 (fixtures register)
    ADA,
    BOB,
    LOUNGE,
    bot_fixture,
    secret_of,
    wait_for,
    wait_for_text,
)

from codemojex.app import BotStack
from codemojex.domain import DEFAULT_SET
from codemojex.store import balances, find_player
from codemojex.telegram.sandbox import Sandbox


async def test_two_players_one_cracks_the_code_and_wins_the_pool(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(ADA, "/play", chat=LOUNGE)
    started = await wait_for_text(sandbox, LOUNGE, "Ada started a new game")
    assert "The winner takes 10 💎" in started.text
    assert started.reply_markup is not None
    sandbox.say(BOB, "/play", chat=LOUNGE)
    await wait_for_text(sandbox, LOUNGE, "Bob joined the game")
    sandbox.say(ADA, "/play", chat=LOUNGE)  # the starter again: no "Ada joined"
    await wait_for_text(sandbox, LOUNGE, "Your game is on, Ada")
    assert not any("Ada joined" in m.text for m in sandbox.messages(LOUNGE))

    secret = await secret_of(bot.pipeline.store, LOUNGE)
    # Bob guesses the secret backwards: every emoji right, every place wrong (not 600).
    sandbox.say(BOB, "/guess " + "".join(reversed(secret)), chat=LOUNGE)
    backwards = "".join(reversed(secret))
    status = await wait_for_text(sandbox, LOUNGE, f"Bob: {backwards} → ")
    assert status.text.startswith("🎯 Live scores")
    # Bob's own copy comes to his private chat, the guess with its score.
    personal = await wait_for_text(sandbox, BOB, f"Your guess: Bob: {backwards} → ")
    assert personal.text.endswith("%")
    wrong = [next(s for s in DEFAULT_SET.symbols if s not in secret), *secret[1:]]
    sandbox.say(ADA, "/guess " + "".join(wrong), chat=LOUNGE)
    # One live status in the group: Ada's score edits it, it is not a message of its own.
    both = await wait_for(
        sandbox, LOUNGE, lambda m: m.message_id == status.message_id and "Ada: " in m.text
    )
    assert f"Bob: {backwards} → " in both.text
    assert sum(m.text.startswith("🎯 Live scores") for m in sandbox.messages(LOUNGE)) == 1

    sandbox.say(ADA, "".join(secret), chat=LOUNGE)  # a bare message of 6 emojis
    await wait_for_text(sandbox, LOUNGE, "🎉 Ada cracked the code!")
    await wait_for_text(sandbox, ADA, "🎉 You cracked the code!")  # privately, as her own win
    assert not any(m.text.startswith("Your guess: 🎉") for m in sandbox.messages(ADA))
    result = await wait_for_text(sandbox, LOUNGE, "🏁 Game over!")
    assert "Ada +10 💎" in result.text
    assert "Bob" not in result.text
    # Both players are members of the group: the one result message reaches them both.

    async with bot.pipeline.store.read() as session:
        ada = await find_player(session, ADA)
        bob = await find_player(session, BOB)
        assert ada is not None
        assert bob is not None
        ada_wallet = await balances(session, ada.id)
        bob_wallet = await balances(session, bob.id)
    assert (ada_wallet.diamonds, ada_wallet.clips) == (10, 98)
    assert (bob_wallet.diamonds, bob_wallet.clips) == (0, 99)

    # The winner's balance shows in /me, and the diamonds convert into a key.
    sandbox.say(ADA, "/me")
    me = await wait_for_text(sandbox, ADA, "10 💎 diamonds")
    assert "Best scores: 100%" in me.text
    sandbox.say(ADA, "/convert 10")
    await wait_for_text(sandbox, ADA, "Converted 10 💎 into 1 🔑")
    # The room waits again: the next /play starts a new game.
    sandbox.say(BOB, "/play", chat=LOUNGE)
    await wait_for_text(sandbox, LOUNGE, "Bob started a new game")

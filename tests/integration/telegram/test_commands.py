"""The command worker through the sandbox, with the whole bot running (real Valkey, real
workers): replies for each command, and a clear reply for each kind of bad input."""

from __future__ import annotations

import asyncio
import time

from bot_rig import ADA, CY, DEE, LOUNGE, bot_fixture, wait_for_text  # noqa: F401

from codemojex.app import BotStack
from codemojex.bot.routers.convert import USAGE
from codemojex.domain import legend
from codemojex.store import RoomKind, balances, ensure_room, find_player
from codemojex.telegram.sandbox import Sandbox


async def test_help_lists_the_commands_and_explains_the_game(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(ADA, "/help")
    reply = await wait_for_text(sandbox, ADA, "/convert")
    assert "/play" in reply.text
    assert "/board" in reply.text
    assert legend() in reply.text  # every square, from the domain's one legend
    assert "6 different emojis out of the 24" in reply.text
    assert "A game runs 35 hours" in reply.text
    assert "the best score takes it" in reply.text  # what the end of the clock does
    assert "topped back up to 100 clips" in reply.text  # how clips come back


async def test_a_guess_that_repeats_an_emoji_is_refused_for_free(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(DEE, "/play")
    started = await wait_for_text(sandbox, DEE, "started a new game")
    assert started.text.count("🟩 right place") == 1  # /play explains the squares, once
    assert len(started.text.splitlines()) <= 5  # short: /help has the rules in full
    sandbox.say(DEE, "/guess 🍒🍒🍒🍒🍒🍒")
    refused = await wait_for_text(sandbox, DEE, "Each emoji at most once: 🍒 repeated")
    assert "6 different emojis" in refused.text
    async with bot.pipeline.store.read() as session:
        player = await find_player(session, DEE)
        assert player is not None
        assert (await balances(session, player.id)).clips == 100  # refused before any charge


async def test_commands_are_case_insensitive_and_one_clip_is_singular(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(CY, "/PLAY")  # Telegram clients send commands in any case
    started = await wait_for_text(sandbox, CY, "Cy started a new game")
    assert "a guess costs 1 clip " in started.text


async def test_unknown_command_gets_a_helpful_reply(sandbox: Sandbox, bot: BotStack) -> None:
    sandbox.say(ADA, "/dance now")
    reply = await wait_for_text(sandbox, ADA, "I don't know the command /dance")
    assert "/play" in reply.text
    assert "/help" in reply.text


async def test_guess_without_a_game_says_how_to_start_one(sandbox: Sandbox, bot: BotStack) -> None:
    sandbox.say(CY, "/guess 🍎🍌🍒🍇🐶🐱")
    await wait_for_text(sandbox, CY, "No game is running in this chat. Send /play")


async def test_wrong_emoji_count_and_unknown_emoji_list_the_keyboard(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(DEE, "/play")
    await wait_for_text(sandbox, DEE, "started a new game")
    sandbox.say(DEE, "/guess 🍎🍌")
    short = await wait_for_text(sandbox, DEE, "exactly 6 emojis; that was 2")
    assert "The keyboard: 🍎 🍌 🍒" in short.text
    sandbox.say(DEE, "🍎🍌🍒🍇🐶🦄")
    unknown = await wait_for_text(sandbox, DEE, "Not on this game's keyboard: 🦄")
    assert "The keyboard:" in unknown.text
    async with bot.pipeline.store.read() as session:
        player = await find_player(session, DEE)
        assert player is not None
        assert (await balances(session, player.id)).clips == 100  # refused before any charge


async def test_convert_with_a_bad_amount_is_refused_and_costs_nothing(
    sandbox: Sandbox, bot: BotStack
) -> None:
    sandbox.say(ADA, "/me")
    await wait_for_text(sandbox, ADA, "100 📎 clips")
    for text, expected in (
        ("/convert", "Usage: /convert N"),
        ("/convert ten", "'ten' is not a whole number"),
        ("/convert 15", "Cannot convert 15 diamonds"),
        ("/convert -10", "Cannot convert -10 diamonds"),
        ("/convert 10 20", "One number, please"),
        ("/convert 20", "Not enough diamonds: you have 0 💎, converting needs 20"),
    ):
        sandbox.say(ADA, text)
        await wait_for_text(sandbox, ADA, expected)
    async with bot.pipeline.store.read() as session:
        player = await find_player(session, ADA)
        assert player is not None
        wallet = await balances(session, player.id)
    assert (wallet.clips, wallet.keys, wallet.diamonds) == (100, 0, 0)


async def test_board_of_a_fresh_game_is_empty(sandbox: Sandbox, bot: BotStack) -> None:
    sandbox.say(ADA, "/play", chat=LOUNGE)
    await wait_for_text(sandbox, LOUNGE, "started a new game")
    sandbox.say(ADA, "/board", chat=LOUNGE)
    await wait_for_text(sandbox, LOUNGE, "No guess scored yet")


async def test_a_burst_in_one_chat_is_drained_by_batch_claims_in_order(
    sandbox: Sandbox, bot: BotStack
) -> None:
    commands = bot.pipeline.queues.commands
    lane = commands.lane(str(ADA))
    await lane.pause()  # let the whole burst land first, so one claim can take it
    amounts = [11 * n for n in range(1, 9)]  # none a multiple of 10: eight distinct refusals
    for amount in amounts:
        sandbox.say(ADA, f"/convert {amount}")
    deadline = time.monotonic() + 10.0
    while await lane.depth() < len(amounts):
        assert time.monotonic() < deadline, "the gateway did not admit the burst"
        await asyncio.sleep(0.02)
    consumer = bot.consumers["command worker"]
    claims_before = consumer.tallies[commands.name].claims
    await lane.resume()

    await sandbox.wait_for_messages(ADA, len(amounts), timeout=30.0)
    texts = [message.text for message in sandbox.messages(ADA)]
    assert texts == [f"Cannot convert {amount} diamonds. {USAGE}" for amount in amounts]
    claims = consumer.tallies[commands.name].claims - claims_before
    assert claims <= 3  # one batch claim, not one per update


async def test_a_command_for_another_bot_in_a_group_is_left_alone(
    sandbox: Sandbox, bot: BotStack
) -> None:
    ours = (await bot.bot.me()).username
    sandbox.say(ADA, "/dance@other_bot", chat=LOUNGE)
    sandbox.say(ADA, f"/dance@{ours}", chat=LOUNGE)  # ours: answered
    reply = await wait_for_text(sandbox, LOUNGE, "I don't know the command /dance")
    assert [m.text for m in sandbox.messages(LOUNGE)] == [reply.text]


async def test_a_refusal_no_handler_expected_is_told_and_not_retried(
    sandbox: Sandbox, bot: BotStack
) -> None:
    # A room written by another tool with a keyboard this build does not ship.
    async with bot.pipeline.store.transaction() as session:
        await ensure_room(session, DEE, RoomKind.FREE, "retired-set", bot.pipeline.minter)
    sandbox.say(DEE, "/play")
    reply = await wait_for_text(sandbox, DEE, "Sorry, that did not work")
    assert "retired-set" in reply.text
    assert (await bot.pipeline.queues.commands.counts()).dead == 0

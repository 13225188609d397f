"""The sandbox's Bot API through aiogram: what a bot sees of users, and what its calls return."""

from __future__ import annotations

import asyncio

import pytest
from aiogram import Bot
from aiogram.exceptions import (
    TelegramBadRequest,
    TelegramConflictError,
    TelegramForbiddenError,
    TelegramNotFound,
    TelegramUnauthorizedError,
)
from aiogram.methods import GetUpdates
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from codemojex.telegram import TelegramConfig, open_bot
from codemojex.telegram.sandbox import LOUNGE, Sandbox


def keyboard(*data: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        inline_keyboard=[[InlineKeyboardButton(text=d, callback_data=d) for d in data]]
    )


async def test_get_me_names_the_bot_of_the_token(sandbox_bot: Bot) -> None:
    me = await sandbox_bot.get_me()
    assert me.id == 100000
    assert me.is_bot


async def test_a_users_command_arrives_as_a_message_update(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    queued = sandbox.say(1001, "🙂 /play now")
    [update] = await sandbox_bot.get_updates()
    assert update.update_id == queued["update_id"]
    message = update.message
    assert message is not None
    assert message.text == "🙂 /play now"
    assert message.chat.id == 1001
    assert message.chat.type == "private"
    assert message.from_user is not None
    assert message.from_user.first_name == "Ada"
    [entity] = message.entities or []
    # Offsets count UTF-16 code units: the emoji is two of them.
    assert (entity.type, entity.offset, entity.length) == ("bot_command", 3, 5)


async def test_a_group_message_names_the_group(sandbox: Sandbox, sandbox_bot: Bot) -> None:
    sandbox.say(1002, "hello all", chat=LOUNGE)
    [update] = await sandbox_bot.get_updates()
    assert update.message is not None
    assert update.message.chat.type == "group"
    assert update.message.chat.id == LOUNGE
    assert update.message.chat.title == "Codemojex lounge"


async def test_an_offset_confirms_the_updates_before_it(sandbox: Sandbox, sandbox_bot: Bot) -> None:
    first = sandbox.say(1001, "one")["update_id"]
    second = sandbox.say(1001, "two")["update_id"]
    assert [u.update_id for u in await sandbox_bot.get_updates()] == [first, second]
    assert [u.update_id for u in await sandbox_bot.get_updates(offset=second)] == [second]
    assert await sandbox_bot.get_updates(offset=second + 1) == []
    assert sandbox.pending_updates == 0


async def test_a_long_poll_returns_as_soon_as_a_user_writes(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    generation = sandbox.poll_generation + 1
    poll = asyncio.create_task(sandbox_bot.get_updates(timeout=20))
    await sandbox.wait_for_poll(generation)  # the poll waits in the sandbox, nothing pending
    assert not poll.done()
    assert sandbox.pending_updates == 0
    sandbox.say(1003, "/start")
    # Well before the poll's 20 s: only the user's message can have ended it.
    async with asyncio.timeout(5):
        [update] = await poll
    assert update.message is not None
    assert update.message.text == "/start"
    assert sandbox.poll_generation == generation  # the same poll, not a later one


async def test_a_replayed_update_comes_again_whatever_the_offset(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    update_id = sandbox.say(1001, "/board")["update_id"]
    await sandbox_bot.get_updates()
    assert await sandbox_bot.get_updates(offset=update_id + 1) == []
    sandbox.replay(update_id)
    [again] = await sandbox_bot.get_updates(offset=update_id + 1)
    assert again.update_id == update_id
    assert await sandbox_bot.get_updates(offset=update_id + 1) == []


async def test_a_second_long_poll_ends_the_first_with_a_conflict(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    generation = sandbox.poll_generation + 1
    first = asyncio.create_task(sandbox_bot.get_updates(timeout=20))
    await sandbox.wait_for_poll(generation)
    second = asyncio.create_task(sandbox_bot.get_updates(timeout=1))
    with pytest.raises(TelegramConflictError, match="terminated by other getUpdates"):
        await first
    assert await second == []


async def test_stopping_the_sandbox_ends_a_long_poll_at_once(sandbox: Sandbox) -> None:
    bot = open_bot(TelegramConfig(sandbox.options.bot_token, base=sandbox.url))
    try:
        generation = sandbox.poll_generation + 1
        poll = asyncio.create_task(bot.get_updates(timeout=30))
        await sandbox.wait_for_poll(generation)
        async with asyncio.timeout(5):
            await sandbox.stop()
            assert await poll == []
    finally:
        await bot.session.close()


async def test_a_sent_message_with_a_keyboard_is_kept_and_returned(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    sent = await sandbox_bot.send_message(1001, "pick one", reply_markup=keyboard("🍎", "🍌"))
    assert sent.chat.id == 1001
    assert sent.text == "pick one"
    assert sent.reply_markup is not None
    assert [b.callback_data for b in sent.reply_markup.inline_keyboard[0]] == ["🍎", "🍌"]
    [kept] = sandbox.messages(1001)
    assert (kept.message_id, kept.text, kept.edits) == (sent.message_id, "pick one", 0)
    assert kept.reply_markup == {
        "inline_keyboard": [
            [{"text": "🍎", "callback_data": "🍎"}, {"text": "🍌", "callback_data": "🍌"}]
        ]
    }
    assert sandbox.stats.delivered == 1
    assert sandbox.stats.by_chat == {1001: 1}


async def test_a_tap_is_a_callback_query_the_bot_answers_once(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    sent = await sandbox_bot.send_message(LOUNGE, "pick", reply_markup=keyboard("a", "b"))
    queued = sandbox.tap(1004, LOUNGE, sent.message_id, "b")
    [update] = await sandbox_bot.get_updates()
    query = update.callback_query
    assert query is not None
    assert query.id == queued["callback_query"]["id"]
    assert query.data == "b"
    assert query.from_user.id == 1004
    assert query.chat_instance
    assert query.message is not None
    assert query.message.message_id == sent.message_id
    assert await sandbox_bot.answer_callback_query(query.id, text="noted")
    with pytest.raises(TelegramBadRequest, match="query ID is invalid"):
        await sandbox_bot.answer_callback_query(query.id)


async def test_an_edit_changes_the_message_in_place(sandbox: Sandbox, sandbox_bot: Bot) -> None:
    sent = await sandbox_bot.send_message(1002, "draft", reply_markup=keyboard("x"))
    edited = await sandbox_bot.edit_message_text(
        text="final", chat_id=1002, message_id=sent.message_id
    )
    assert not isinstance(edited, bool)
    assert edited.text == "final"
    assert edited.edit_date is not None
    [kept] = sandbox.messages(1002)
    assert (kept.text, kept.reply_markup, kept.edits) == ("final", None, 1)
    assert sandbox.stats.edited == 1
    with pytest.raises(TelegramBadRequest, match="message is not modified"):
        await sandbox_bot.edit_message_text(text="final", chat_id=1002, message_id=sent.message_id)
    with pytest.raises(TelegramBadRequest, match="message to edit not found"):
        await sandbox_bot.edit_message_text(text="x", chat_id=1002, message_id=999)


@pytest.mark.parametrize(
    ("chat", "text", "description"),
    [
        (4242, "hi", "chat not found"),
        (-4242, "hi", "chat not found"),
        (1001, "", "message text is empty"),
        (1001, "   ", "message text is empty"),
        (1001, "x" * 4097, "message is too long"),
    ],
)
async def test_a_bad_send_is_a_bad_request_and_not_delivered(
    sandbox: Sandbox, sandbox_bot: Bot, chat: int, text: str, description: str
) -> None:
    with pytest.raises(TelegramBadRequest, match=description):
        await sandbox_bot.send_message(chat, text)
    assert sandbox.stats.delivered == 0
    assert sandbox.stats.bad_requests == 1


async def test_a_blocked_user_is_forbidden_until_unblocked(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    sandbox.block(1003)
    with pytest.raises(TelegramForbiddenError, match="bot was blocked by the user"):
        await sandbox_bot.send_message(1003, "hello?")
    assert sandbox.stats.forbidden == 1
    assert sandbox.messages(1003) == []
    sandbox.unblock(1003)
    await sandbox_bot.send_message(1003, "hello again")
    assert len(sandbox.messages(1003)) == 1


async def test_a_wrong_token_is_unauthorized(sandbox: Sandbox) -> None:
    bot = open_bot(TelegramConfig("100000:wrong", base=sandbox.url))
    try:
        with pytest.raises(TelegramUnauthorizedError):
            await bot.get_me()
    finally:
        await bot.session.close()


async def test_an_unknown_method_is_not_found(sandbox_bot: Bot) -> None:
    class Bogus(GetUpdates):
        __api_method__ = "getBogus"

    with pytest.raises(TelegramNotFound):
        await sandbox_bot(Bogus())


async def test_get_updates_conflicts_with_a_webhook(sandbox: Sandbox, sandbox_bot: Bot) -> None:
    assert await sandbox_bot.set_webhook("http://127.0.0.1:9/hook", secret_token="s3cret")
    info = await sandbox_bot.get_webhook_info()
    assert info.url == "http://127.0.0.1:9/hook"
    with pytest.raises(TelegramConflictError, match="webhook is active"):
        await sandbox_bot.get_updates()
    assert await sandbox_bot.delete_webhook()
    sandbox.say(1001, "back to polling")
    assert len(await sandbox_bot.get_updates()) == 1


async def test_wait_for_messages_wakes_on_the_nth_message(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    waiting = asyncio.create_task(sandbox.wait_for_messages(1001, 2, timeout=10))
    await sandbox_bot.send_message(1001, "one")
    assert not waiting.done()
    await sandbox_bot.send_message(1001, "two")
    assert [m.text for m in await waiting] == ["one", "two"]
    with pytest.raises(TimeoutError):
        await sandbox.wait_for_messages(1001, 3, timeout=0.2)


async def test_ids_keep_growing_after_a_raw_update_with_a_large_id(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    sandbox.push_raw({"update_id": 777_000, "message": "not an object"})
    later = sandbox.say(1001, "/help")["update_id"]
    assert later > 777_000
    raw = await sandbox_bot(GetUpdates(offset=777_000 + 1))
    assert [u.update_id for u in raw] == [later]

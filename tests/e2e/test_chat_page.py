"""The sandbox's chat page in headless Chromium (Debian's binary, driven by Playwright), with a
small aiogram bot polling the sandbox: a person picks a user and a chat, writes, sees the bot's
reply arrive live, and taps an inline button that the bot answers by editing its message."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest
from aiogram import Bot, Dispatcher, F, Router
from aiogram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message
from playwright.async_api import Browser, Page, expect

from codemojex.telegram import TelegramConfig, open_bot
from codemojex.telegram.sandbox import LOUNGE, Sandbox, SandboxOptions

WAIT_MS = 15_000  # generous: the machine is shared


def echo_bot(taps: list[str]) -> Router:
    """A stand-in bot: echoes each message with two buttons; a tap edits the message."""
    router = Router()

    @router.message(F.text)
    async def echo(message: Message, bot: Bot) -> None:
        keyboard = InlineKeyboardMarkup(
            inline_keyboard=[
                [
                    InlineKeyboardButton(text="🍎 apple", callback_data="pick:🍎"),
                    InlineKeyboardButton(text="🍌 banana", callback_data="pick:🍌"),
                ]
            ]
        )
        await bot.send_message(message.chat.id, f"echo: {message.text}", reply_markup=keyboard)

    @router.callback_query()
    async def tapped(query: CallbackQuery, bot: Bot) -> None:
        assert query.message is not None
        taps.append(query.data or "")
        await bot.answer_callback_query(query.id, text=f"got {query.data}")
        await bot.edit_message_text(
            f"you picked {query.data}",
            chat_id=query.message.chat.id,
            message_id=query.message.message_id,
        )

    return router


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(SandboxOptions(control_token=secrets.token_urlsafe(16))) as started:
        yield started


@pytest.fixture
async def taps(sandbox: Sandbox) -> AsyncIterator[list[str]]:
    """The bot polls the sandbox for the whole test; returns the callback data it was given."""
    seen: list[str] = []
    dispatcher = Dispatcher()
    dispatcher.include_router(echo_bot(seen))
    bot = open_bot(TelegramConfig(sandbox.options.bot_token, base=sandbox.url))
    polling = asyncio.create_task(
        dispatcher.start_polling(bot, handle_signals=False, polling_timeout=5)
    )
    yield seen
    await dispatcher.stop_polling()
    await polling  # closes the bot's session


@pytest.fixture
async def page(browser: Browser, sandbox: Sandbox) -> AsyncIterator[Page]:
    opened = await browser.new_page()
    await opened.goto(sandbox.chat_page_url)
    yield opened
    await opened.close()


async def test_a_message_gets_the_bots_reply_live_and_a_tap_edits_it(
    sandbox: Sandbox, taps: list[str], page: Page
) -> None:
    await page.click('#users button[data-user="1002"]')
    await page.click('#chats button[data-chat="1002"]')
    await expect(page.locator("#chat-sub")).to_contain_text("Bob", timeout=WAIT_MS)
    await expect(page.locator("#live")).to_have_class("on", timeout=WAIT_MS)
    await page.fill("#text", "/play ")
    await page.click('#palette button:has-text("🍒")')
    await page.click("#send")

    mine = page.locator(".msg.mine .text")
    await expect(mine).to_have_text("/play 🍒", timeout=WAIT_MS)
    reply = page.locator(".msg.bot").last
    await expect(reply.locator(".text")).to_have_text("echo: /play 🍒", timeout=WAIT_MS)
    [sent] = sandbox.messages(1002)
    assert sent.text == "echo: /play 🍒"

    await reply.locator('.keyboard button[data-data="pick:🍌"]').click()
    await expect(reply.locator(".text")).to_have_text("you picked pick:🍌", timeout=WAIT_MS)
    await expect(reply.locator(".meta")).to_contain_text("edited", timeout=WAIT_MS)
    await expect(page.locator("#toast")).to_have_text("got pick:🍌", timeout=WAIT_MS)
    assert taps == ["pick:🍌"]
    assert sandbox.messages(1002)[0].edits == 1
    await expect(page.locator('#stats span[data-stat="delivered"]')).to_have_text(
        "sent 1", timeout=WAIT_MS
    )


async def test_a_group_shows_who_wrote_and_counts_replies_elsewhere(
    sandbox: Sandbox, taps: list[str], page: Page
) -> None:
    await page.click('#users button[data-user="1003"]')
    await page.click(f'#chats button[data-chat="{LOUNGE}"]')
    await expect(page.locator("#chat-title")).to_have_text("Codemojex lounge", timeout=WAIT_MS)
    sandbox.say(1001, "hello lounge", chat=LOUNGE)  # Ada writes; the page follows as Cy
    other = page.locator(".msg:not(.mine):not(.bot)")
    await expect(other.locator(".who")).to_have_text("Ada", timeout=WAIT_MS)
    await expect(page.locator(".msg.bot .text")).to_have_text("echo: hello lounge", timeout=WAIT_MS)
    sandbox.say(1003, "psst", chat=1003)  # Cy's private chat: an unread badge, not this list
    badge = page.locator('#chats button[data-chat="1003"] .badge')
    await expect(badge).to_have_text("1", timeout=WAIT_MS)
    await expect(page.locator(".msg .text")).to_have_count(2)


async def test_the_page_without_its_token_is_refused(browser: Browser, sandbox: Sandbox) -> None:
    page = await browser.new_page()
    try:
        response = await page.goto(sandbox.url + "/")
        assert response is not None
        assert response.status == 403
    finally:
        await page.close()


async def test_a_user_made_after_the_page_loaded_appears(sandbox: Sandbox, page: Page) -> None:
    await expect(page.locator("#live")).to_have_class("on", timeout=WAIT_MS)
    sandbox.say(1042, "hi, I am new")
    await expect(page.locator('#users button[data-user="1042"] .name')).to_have_text(
        "user 1042", timeout=WAIT_MS
    )

"""The chat page as a person on a phone meets it, in headless Chromium at 390 px: nothing is wider
than the screen, the bot's keyboard wraps, the input stays usable, emojis are drawn in colour (not
boxes), the conversation follows the newest message, and a tab left open on a sandbox started
afresh (a new token) turns into a page that says so and where the current link is."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiogram.types import InlineKeyboardMarkup
from playwright.async_api import Browser, Page, expect

from codemojex.telegram import TelegramConfig, open_bot
from codemojex.telegram.sandbox import LOUNGE, Sandbox, SandboxOptions

WAIT_MS = 15_000  # generous: the machine is shared
PHONE = {"width": 390, "height": 844}
ADA = 1001
WIDE_KEYBOARD = {  # one row of eight buttons: never fits on one line at 390 px
    "inline_keyboard": [
        [
            {"text": f"{e} {e}{e}", "callback_data": f"k:{n}"}
            for n, e in enumerate("🍎🍌🍒🍇🐶🐱🦊🐸")
        ]
    ]
}
AT_END = "() => { const m = document.getElementById('messages');"
AT_END += " return m.scrollHeight - m.scrollTop - m.clientHeight < 2; }"
READ_UP = "() => { document.getElementById('messages').scrollTop = 0; return !view.follow; }"


@pytest.fixture
async def sandbox(tmp_path: Path) -> AsyncIterator[Sandbox]:
    async with Sandbox(SandboxOptions(data_dir=tmp_path / "sandbox")) as started:
        yield started


@pytest.fixture
async def phone(browser: Browser) -> AsyncIterator[Page]:
    opened = await browser.new_page(viewport=PHONE)
    yield opened
    await opened.close()


async def open_chat(page: Page, sandbox: Sandbox) -> None:
    await page.goto(sandbox.chat_page_url)
    await expect(page.locator("#live")).to_have_class("on", timeout=WAIT_MS)
    await expect(page.locator("#chat-sub")).to_contain_text("Ada", timeout=WAIT_MS)


async def test_at_phone_width_nothing_overflows_the_keyboard_wraps_and_emojis_have_colour(
    sandbox: Sandbox, phone: Page
) -> None:
    await open_chat(phone, sandbox)
    sandbox.say(ADA, "an unbreakable " + "🍒x" * 120)
    bot = open_bot(TelegramConfig(sandbox.options.bot_token, base=sandbox.url))
    try:
        await bot.send_message(
            ADA, "pick one", reply_markup=InlineKeyboardMarkup.model_validate(WIDE_KEYBOARD)
        )
    finally:
        await bot.session.close()
    keys = phone.locator(".msg.bot .keyboard button")
    await expect(keys).to_have_count(8, timeout=WAIT_MS)

    widths = await phone.evaluate(
        """() => [document.documentElement, document.getElementById("messages")]
                   .map((e) => [e.scrollWidth, e.clientWidth])"""
    )
    for scroll_width, client_width in widths:
        assert scroll_width <= client_width, widths
    boxes = [await key.bounding_box() for key in await keys.all()]
    assert all(box is not None and box["x"] + box["width"] <= PHONE["width"] for box in boxes)
    assert len({round(box["y"]) for box in boxes if box}) > 1, "the row wrapped onto lines"
    field = await phone.locator("#text").bounding_box()
    send = await phone.locator("#send").bounding_box()
    assert field is not None
    assert send is not None
    assert field["width"] >= 150
    assert send["x"] + send["width"] <= PHONE["width"]
    assert send["y"] + send["height"] <= PHONE["height"]

    # A colour emoji font draws 🍒 red; without one it is a grey box or nothing.
    coloured = await phone.evaluate(
        """() => { const c = document.createElement("canvas"); c.width = c.height = 48;
                   const g = c.getContext("2d"); g.font = "40px sans-serif";
                   g.textBaseline = "top"; g.fillText("🍒", 2, 2);
                   const d = g.getImageData(0, 0, 48, 48).data; let n = 0;
                   for (let i = 0; i < d.length; i += 4)
                     if (d[i + 3] > 128 && d[i] - Math.max(d[i + 1], d[i + 2]) > 80) n++;
                   return n; }"""
    )
    assert coloured > 50, "no colour emoji font: is fonts-noto-color-emoji installed?"
    icon = await phone.evaluate(
        """async () => { const link = document.querySelector('link[rel="icon"]');
                         const r = await fetch(link.href);
                         return [r.status, r.headers.get("content-type")]; }"""
    )
    assert icon == [200, "image/svg+xml; charset=utf-8"]


async def test_the_conversation_follows_the_newest_message_on_send_and_on_arrival(
    sandbox: Sandbox, phone: Page
) -> None:
    for n in range(40):
        sandbox.say(1002, f"filler {n}", chat=LOUNGE)
    await open_chat(phone, sandbox)
    await phone.click(f'#chats button[data-chat="{LOUNGE}"]')
    await expect(phone.locator(".msg")).to_have_count(40, timeout=WAIT_MS)
    await phone.wait_for_function(AT_END, timeout=WAIT_MS)  # the history opens at its end

    sandbox.say(1003, "Cy arrives", chat=LOUNGE)  # arrival while following: still at the end
    await expect(phone.locator(".msg").last).to_contain_text("Cy arrives", timeout=WAIT_MS)
    await phone.wait_for_function(AT_END, timeout=WAIT_MS)

    # Ada reads further up. The page learns it from the scroll event, a frame later, and a late
    # layout change (a font) may snap a following view back to the end first: scroll up on each
    # frame until the page says it stopped following, then let the message arrive.
    await phone.wait_for_function(READ_UP, timeout=WAIT_MS)
    sandbox.say(1004, "Dee, while Ada reads", chat=LOUNGE)  # reading up: no jump, a button
    await expect(phone.locator("#jump")).to_be_visible(timeout=WAIT_MS)
    assert await phone.locator("#messages").evaluate("(m) => m.scrollTop") == 0

    await phone.fill("#text", "Ada sends from up there")
    await phone.click("#send")
    await expect(phone.locator(".msg.mine").last).to_contain_text("from up there", timeout=WAIT_MS)
    await phone.wait_for_function(AT_END, timeout=WAIT_MS)
    last = await phone.locator(".msg").last.bounding_box()
    pane = await phone.locator("#messages").bounding_box()
    assert last is not None
    assert pane is not None
    assert last["y"] + last["height"] <= pane["y"] + pane["height"] + 1  # in sight
    await expect(phone.locator("#jump")).to_be_hidden()


async def test_a_tab_left_open_on_a_sandbox_started_afresh_explains_the_stale_link(
    tmp_path: Path, sandbox: Sandbox, browser: Browser
) -> None:
    page = await browser.new_page()
    try:
        await open_chat(page, sandbox)
        stale = sandbox.chat_page_url
        port = int(sandbox.url.rsplit(":", 1)[1])
        await sandbox.stop()
        fresh = SandboxOptions(port=port, data_dir=tmp_path / "another")
        async with Sandbox(fresh) as afresh:
            # The tab's event stream reconnects, is refused, and the page reloads onto why.
            explanation = page.locator("#stale")
            await expect(explanation).to_contain_text("not the one this sandbox", timeout=WAIT_MS)
            await expect(explanation).to_contain_text("chat page")
            assert afresh.options.control_token not in await page.content()
            async with aiohttp.ClientSession() as http:  # the API still answers in JSON
                state = stale.replace("/?token=", "/sandbox/state?token=")
                async with http.get(state) as answer:
                    assert answer.status == 403
                    assert "control token" in (await answer.json())["error"]
    finally:
        await page.close()

"""The game itself in the chat page: ``codemojex up`` runs as a newcomer starts it, and headless
Chromium (Debian's binary, driven by Playwright) plays as Ada — ``/play``, six taps on the inline
emoji keyboard, ✅ — and sees the score worker's reply arrive live."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Browser, expect
from up_rig import codemojex_up

WAIT_MS = 20_000  # generous: the machine is shared
TAPS = ["🍎", "🍌", "🍒", "🍇", "🐶", "🐱"]


async def test_a_player_composes_a_guess_on_the_keyboard_and_sees_its_score(
    tmp_path: Path, browser: Browser
) -> None:
    async with codemojex_up(tmp_path) as run:
        page = await browser.new_page()
        try:
            await page.goto(f"{run.chat}/?token={run.token}")
            await page.click('#users button[data-user="1001"]')
            await page.click('#chats button[data-chat="1001"]')
            await expect(page.locator("#live")).to_have_class("on", timeout=WAIT_MS)
            await page.fill("#text", "/play")
            await page.click("#send")
            started = page.locator(".msg.bot", has_text="started a new game")
            await expect(started).to_have_count(1, timeout=WAIT_MS)
            # The keyboard message is edited as the draft grows: follow it by its id.
            message_id = await started.get_attribute("data-message-id")
            board = page.locator(f'.msg.bot[data-message-id="{message_id}"]')
            for n, symbol in enumerate(TAPS, 1):
                await board.locator(".keyboard button", has_text=symbol).first.click()
                # Each tap edits the message (the draft so far): wait for it before the next.
                draft = "".join(TAPS[:n])
                await expect(board.locator(".text")).to_contain_text(draft, timeout=WAIT_MS)
            await board.locator(".keyboard button", has_text="✅").click()
            scored = page.locator(".msg.bot .text", has_text=re.compile(r"^Ada: \S+ → \S+ \d+%$"))
            await expect(scored).to_have_count(1, timeout=WAIT_MS)
        finally:
            await page.close()

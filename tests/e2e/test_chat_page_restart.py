"""The chat page survives a restart of ``codemojex up`` on the same data directory: a tab left open
reconnects by itself and still shows the conversation, its link (the control token) still works
for the restarted bot, and the token is kept in a file only its owner can read."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

from playwright.async_api import Browser, Page, expect
from up_rig import codemojex_up

WAIT_MS = 30_000  # generous: the machine is shared and the game restarts in between


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def ask(page: Page, text: str, answer: str) -> None:
    """Ada writes ``text`` in the page and waits for the bot's reply containing ``answer``."""
    await page.fill("#text", text)
    await page.click("#send")
    reply = page.locator(".msg.bot", has_text=answer)
    await expect(reply.last).to_be_visible(timeout=WAIT_MS)


async def test_an_open_tab_survives_a_restart_with_its_history_and_its_link(
    tmp_path: Path, browser: Browser
) -> None:
    port = free_port()
    page = await browser.new_page()
    try:
        async with codemojex_up(tmp_path, sandbox_port=port) as run:
            await page.goto(f"{run.chat}/?token={run.token}")
            await expect(page.locator("#live")).to_have_class("on", timeout=WAIT_MS)
            await ask(page, "/help", "/play")
            before = await page.locator(".msg .text").all_inner_texts()
        await expect(page.locator("#live")).not_to_have_class("on", timeout=WAIT_MS)

        async with codemojex_up(tmp_path, sandbox_port=port) as again:
            assert again.token == run.token
            await expect(page.locator("#live")).to_have_class("on", timeout=WAIT_MS)
            await ask(page, "/me", "clips")  # the old tab talks to the restarted bot
            after = await page.locator(".msg .text").all_inner_texts()
            assert after[: len(before)] == before  # the conversation is still there
            fresh = await browser.new_page()
            try:  # and the old link, opened anew, shows it too
                await fresh.goto(f"{run.chat}/?token={run.token}")
                # The bot may still be answering (a later message): what the old tab had when
                # read is the new tab's beginning.
                texts = fresh.locator(".msg .text")
                await expect(texts.nth(len(after) - 1)).to_be_visible(timeout=WAIT_MS)
                assert (await texts.all_inner_texts())[: len(after)] == after
            finally:
                await fresh.close()
        tokens = tmp_path / "sandbox" / "tokens.json"
        assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
        assert run.token in tokens.read_text()
    finally:
        await page.close()

"""Redraw the README's screenshots from a real ``codemojex up``: a game in the sandbox's group
chat (the chat page) and the dashboard with two lanes paused and work waiting behind them.

    .venv/bin/python docs/screenshots.py   # docs/img/chat.png, docs/img/game-dashboard.png

Needs Debian's chromium (``make browser-deps``); emojis render in colour when the
``fonts-noto-color-emoji`` package is installed.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import tempfile
from pathlib import Path

import aiohttp
from playwright.async_api import async_playwright

IMG = Path(__file__).parent / "img"
LOUNGE = -1001
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
SCRIPT = [
    (1001, "/play"),
    (1002, "/guess 🍎🍌🍒🍇🐶🐱"),
    (1003, "/guess 🦊🐸🐙🦋🌵🌻"),
    (1001, "/guess ⚽🏀🎸🎲🚀🚲"),
    (1002, "/board"),
]


async def post(
    http: aiohttp.ClientSession,
    url: str,
    body: dict[str, object],
    headers: dict[str, str] | None = None,
) -> None:
    async with http.post(url, json=body, headers=headers) as answer:
        answer.raise_for_status()


async def main() -> None:
    data = Path(tempfile.mkdtemp(prefix="codemojex-shots-"))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-u", "-m", "codemojex.cli", "up", "--data-dir", str(data),
        "--sandbox-port", "0", "--dashboard-port", "0", stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None
    text = ""
    while "codemojex ready" not in text:
        line = await process.stdout.readline()
        if not line:
            raise SystemExit(f"codemojex up stopped:\n{text}")
        text += line.decode()
    chat = re.search(r"chat page +(http\S+)", text)
    board = re.search(r"dashboard +(http\S+)", text)
    assert chat is not None
    assert board is not None
    base = chat.group(1).split("/?")[0]
    token = chat.group(1).split("token=")[1]
    try:
        async with aiohttp.ClientSession(headers={"X-Sandbox-Token": token}) as http:
            for user, said in SCRIPT:
                await post(
                    http, f"{base}/sandbox/say", {"user": user, "chat": LOUNGE, "text": said}
                )
                await asyncio.sleep(1.5)  # a person's pace, and the group's 20/min budget
            # Something for the dashboard to show: the lounge's notification lane and Dee's
            # command lane paused through its API, with work waiting behind them.
            dashboard = board.group(1).split("/?")[0]
            admin = {"X-Dashboard-Token": board.group(1).split("token=")[1]}
            for queue, lane in (("cm.notify", LOUNGE), ("cm.bot.commands", 1004)):
                await post(http, f"{dashboard}/api/queues/{queue}/lanes/{lane}/pause", {}, admin)
            for user, room, said in ((1001, LOUNGE, "/me"), (1002, LOUNGE, "/me"),
                                     (1004, 1004, "/help"), (1004, 1004, "/me")):  # fmt: skip
                await post(http, f"{base}/sandbox/say", {"user": user, "chat": room, "text": said})
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
            )
            page = await browser.new_page(viewport={"width": 1200, "height": 820})
            await page.goto(chat.group(1))
            await page.click('#users button[data-user="1001"]')
            await page.click(f'#chats button[data-chat="{LOUNGE}"]')
            await page.wait_for_timeout(1500)
            await page.screenshot(path=str(IMG / "chat.png"))
            await page.goto(board.group(1))
            await page.wait_for_timeout(2500)
            await page.screenshot(path=str(IMG / "game-dashboard.png"), full_page=True)
            await browser.close()
    finally:
        process.send_signal(signal.SIGINT)
        await process.wait()
    print(f"wrote {IMG / 'chat.png'} and {IMG / 'game-dashboard.png'}")


if __name__ == "__main__":
    asyncio.run(main())

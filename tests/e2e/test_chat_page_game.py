"""The game itself in the chat page: ``codemojex up`` runs as a newcomer starts it (one run per
test), and headless Chromium (Debian's binary, driven by Playwright) plays it.

In a private chat Ada reads ``/help`` (the squares, the 6-of-24 code), has a guess repeating an
emoji refused, then composes one on the inline keyboard and sees its score, guess included. In the
lounge (a group) four players send a burst of 8 guesses, ABCDABCD: the game's one live status
message and each player's own chat must show them in the order they were sent, the status below
the guesses; once chatter has scrolled it away, the next guess is answered by the status sent
anew beneath it, quoting the guess.
"""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

from playwright.async_api import Browser, Page, expect
from up_rig import codemojex_up

from codemojex.domain import get_set
from codemojex.notify.status import SCROLLED_AFTER
from codemojex.telegram.sandbox import LOUNGE, PREDEFINED_USERS

WAIT_MS = 30_000  # generous: the machine is shared
ROUNDS = 3  # keyboard guesses timed in a private chat
TAPS = ["🍎", "🍌", "🍒", "🍇", "🐶", "🐱"]
SQUARES = "🟩🟨🟧🟥🟪⬛"
# Six squares, as an alternation: the browser's regular expressions count UTF-16 units, and
# five of the squares are two of them.
SIX_SQUARES = f"(?:{'|'.join(SQUARES)}){{6}}"
KEYBOARD = get_set("classic").symbols  # the default room's 24 emojis
# Eight different guesses of six different emojis (windows of the keyboard, none cracks a code
# drawn at random but by a 1 in 96 million chance), sent by the four players in turn.
BURST = [
    (PREDEFINED_USERS[n % 4], "".join(KEYBOARD[2 * n : 2 * n + 6])) for n in range(len("ABCDABCD"))
]
LATE = "".join(reversed(KEYBOARD[18:24]))  # a guess after the burst, on none of its windows
STATUS_LINE = re.compile(rf"^(\w+): (\S+) → {SIX_SQUARES} \d+%$")


def score_text(name: str, guess: str, prefix: str = "") -> re.Pattern[str]:
    """A score message for ``name``'s ``guess``: the guess shown with its squares."""
    return re.compile(f"^{re.escape(prefix)}{name}: {re.escape(guess)} → {SIX_SQUARES} \\d+%$")


async def open_chat(page: Page, user: int, chat: int) -> None:
    await page.click(f'#users button[data-user="{user}"]')
    await page.click(f'#chats button[data-chat="{chat}"]')
    await expect(page.locator(f'#chats button.on[data-chat="{chat}"]')).to_have_count(1)


async def start_in_the_lounge(page: Page, chat_page: str, token: str) -> None:
    """Ada opens the group chat on the chat page and starts a game there."""
    await page.goto(f"{chat_page}/?token={token}")
    await open_chat(page, 1001, LOUNGE)
    await expect(page.locator("#live")).to_have_class("on", timeout=WAIT_MS)
    await send(page, "/play")
    started = page.locator(".msg.bot", has_text="started a new game")
    await expect(started).to_have_count(1, timeout=WAIT_MS)


async def send(page: Page, text: str) -> None:
    await page.fill("#text", text)
    await page.click("#send")
    await expect(page.locator(".msg.mine .text", has_text=text).last).to_be_visible(timeout=WAIT_MS)


async def test_a_player_reads_the_help_is_refused_a_repeat_and_sees_the_guess_in_its_score(
    tmp_path: Path, browser: Browser
) -> None:
    async with codemojex_up(tmp_path) as run:
        page = await browser.new_page()
        try:
            await page.goto(f"{run.chat}/?token={run.token}")
            await open_chat(page, 1001, 1001)
            await expect(page.locator("#live")).to_have_class("on", timeout=WAIT_MS)

            await send(page, "/help")
            help_ = page.locator(".msg.bot .text", has_text="/board")
            for square in SQUARES:  # each square, with what it means
                await expect(help_).to_contain_text(re.compile(f"{square} \\w"), timeout=WAIT_MS)
            await expect(help_).to_contain_text(re.compile(r"\b6\b[^\n]*\b24\b"))

            await send(page, "/play")
            started = page.locator(".msg.bot", has_text="started a new game")
            await expect(started).to_have_count(1, timeout=WAIT_MS)

            await send(page, "/guess 🍒🍒🍒🍒🍒🍒")
            refused = page.locator(".msg.bot .text", has_text="at most once")
            await expect(refused).to_contain_text("🍒 repeated", timeout=WAIT_MS)

            # Each tap answers with the draft in a toast (no edit: issue 29.2); ✅ sends it.
            # Three keyboard guesses, each timed from the ✅ click to its score on the page.
            message_id = await started.get_attribute("data-message-id")
            board = page.locator(f'.msg.bot[data-message-id="{message_id}"]')
            scores = page.locator(".msg.bot .text", has_text=re.compile(r"→ .* \d+%$"))
            took = []
            for round_ in range(1, ROUNDS + 1):
                for n, symbol in enumerate(TAPS, 1):
                    await board.locator(".keyboard button", has_text=symbol).first.click()
                    draft = "".join(TAPS[:n])
                    await expect(page.locator("#toast")).to_contain_text(draft, timeout=WAIT_MS)
                started_at = time.monotonic()
                await board.locator(".keyboard button", has_text="✅").click()
                # The keyboard guess's score, showing it: the repeat was never charged.
                await expect(scores).to_have_text(
                    [score_text("Ada", "".join(TAPS))] * round_, timeout=WAIT_MS
                )
                took.append(time.monotonic() - started_at)
            # The target is a p50 of 0.5 s; printed as a figure, and held only to a
            # bound a loaded machine keeps (before the fix it was about 3 s).
            print(f"keyboard guess, ✅ to score: p50 {statistics.median(took):.2f} s, {took}")
            assert statistics.median(took) < 2.0, took
        finally:
            await page.close()


RECORD = """token => new Promise((opened, failed) => {
  // Every message and edit the sandbox delivers, in the order it delivers them.
  window.recorded = [];
  const stream = new EventSource("/sandbox/stream?token=" + encodeURIComponent(token));
  const keep = (kind) => (e) => {
    const m = JSON.parse(e.data);
    window.recorded.push({ kind, chat: m.chat.id, id: m.message_id, bot: m.from.is_bot,
                           text: m.text || "" });
  };
  stream.addEventListener("message", keep("message"));
  stream.addEventListener("edit", keep("edit"));
  stream.onopen = () => opened(true);
  stream.onerror = () => failed(new Error("the recording stream failed"));
})"""

BURST_JS = """async ([token, chat, burst]) => {
  // One guess after another, each sent once the sandbox took the previous one: a burst.
  for (const [user, text] of burst) {
    const response = await fetch("/sandbox/say", { method: "POST",
      headers: { "X-Sandbox-Token": token, "Content-Type": "application/json" },
      body: JSON.stringify({ user, chat, text }) });
    if (!response.ok) throw new Error(`say ${text}: HTTP ${response.status}`);
  }
}"""


def shown(status: str) -> dict[str, str]:
    """The live status's lines as ``{player: guess}`` (its first line is the title)."""
    lines = status.split("\n")[1:]
    found = {}
    for line in lines:
        match = STATUS_LINE.match(line)
        assert match is not None, f"a status line without its guess: {line!r} in {status!r}"
        found[match.group(1)] = match.group(2)
    assert len(found) == len(lines), f"a player on two lines: {status!r}"
    return found


def positions(status: str) -> dict[str, int]:
    """Where each player shown on a status is in the burst: the index of the guess shown."""
    index = {(name, guess): n for n, ((_, name), guess) in enumerate(BURST)}
    return {name: index[(name, guess)] for name, guess in shown(status).items()}


async def test_a_burst_of_guesses_in_a_group_arrives_in_order_on_its_live_status(
    tmp_path: Path, browser: Browser
) -> None:
    async with codemojex_up(tmp_path) as run:
        page = await browser.new_page()
        try:
            await start_in_the_lounge(page, run.chat, run.token)

            await page.evaluate(RECORD, run.token)
            burst = [[user, f"/guess {guess}"] for (user, _), guess in BURST]
            await page.evaluate(BURST_JS, [run.token, LOUNGE, burst])

            # The group: a live status, edited in place, and sent anew below the guesses once it
            # has scrolled away (a loaded machine scores slower than the burst arrives, so that
            # may happen mid-burst); the newest ends on each player's latest guess.
            status = page.locator(".msg.bot", has_text="Live scores").last
            for (_, name), guess in BURST[4:]:
                await expect(status.locator(".text")).to_contain_text(
                    f"{name}: {guess} →", timeout=WAIT_MS
                )
            final = await status.locator(".text").inner_text()
            status_id = int(await status.get_attribute("data-message-id") or 0)
            assert shown(final) == {name: guess for (_, name), guess in BURST[4:]}

            # Each player's own chat: their two scores, in the order they guessed.
            for n, (user, name) in enumerate(PREDEFINED_USERS):
                await open_chat(page, user, user)
                mine = [score_text(name, BURST[k][1], "Your guess: ") for k in (n, n + 4)]
                await expect(page.locator(".msg.bot .text")).to_have_text(mine, timeout=WAIT_MS)

            # Everything the sandbox delivered during the burst, in its order.
            recorded = await page.evaluate("window.recorded")
            lounge = [e for e in recorded if e["chat"] == LOUNGE and e["bot"]]
            ids = [e["id"] for e in lounge]
            # Edits stay on their message; a status sent anew comes below the last one.
            assert ids == sorted(ids), lounge
            assert ids[-1] == status_id, lounge
            first: dict[int, str] = {}
            for event in lounge:
                first.setdefault(event["id"], event["kind"])
            assert set(first.values()) == {"message"}, lounge  # each sent once, then edited
            assert len(first) <= 1 + len(BURST) // SCROLLED_AFTER, lounge  # not one per guess
            # Each player's line moves forward only, in the order that player guessed. Across
            # players the status follows the scoring, which runs side by side on the players'
            # own lanes (fairness): Bob's second guess may be scored before Ada's first.
            seen: dict[str, int] = {}
            for edit in lounge:
                for name, at in positions(edit["text"]).items():
                    assert at >= seen.get(name, -1), f"{name}'s line went back: {lounge}"
                    seen[name] = at
            assert seen == {name: n for n, ((_, name), _) in enumerate(BURST) if n >= 4}
            # The status answers under the guesses, not above them (issue 29.1).
            guesses = [e["id"] for e in recorded if e["chat"] == LOUNGE and not e["bot"]]
            assert status_id >= max(guesses) - SCROLLED_AFTER, (status_id, guesses)

            # The room chats on until the status has scrolled away; the next guess is answered
            # by the status sent anew below it, quoting the guess it answers.
            await open_chat(page, 1001, LOUNGE)
            for n in range(SCROLLED_AFTER + 2):
                await send(page, f"nice one {n}")
            await send(page, f"/guess {LATE}")
            mine = page.locator(".msg.mine", has_text=LATE).last
            guess_id = int(await mine.get_attribute("data-message-id") or 0)
            answer = page.locator(".msg.bot", has_text="Live scores").last
            await expect(answer.locator(".text")).to_contain_text(f"Ada: {LATE} →", timeout=WAIT_MS)
            await expect(answer.locator(".quote")).to_contain_text(LATE)
            assert int(await answer.get_attribute("data-message-id") or 0) > guess_id
        finally:
            await page.close()


CONTROL_JS = """async ([token, path, body]) => {
  const response = await fetch(path, { method: "POST",
    headers: { "X-Sandbox-Token": token, "Content-Type": "application/json" },
    body: JSON.stringify(body) });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
}"""


async def test_a_player_who_never_started_the_bot_is_told_how_and_gets_the_score_on_start(
    tmp_path: Path, browser: Browser
) -> None:
    eve = 1099
    async with codemojex_up(tmp_path) as run:
        page = await browser.new_page()
        try:
            await start_in_the_lounge(page, run.chat, run.token)

            # Eve never opened the bot (Telegram refuses the bot's private sends to her).
            user = {"user": eve, "first_name": "Eve", "has_started": False}
            await page.evaluate(CONTROL_JS, [run.token, "/sandbox/users", user])
            guess = {"user": eve, "chat": LOUNGE, "text": f"/guess {LATE}"}
            await page.evaluate(CONTROL_JS, [run.token, "/sandbox/say", guess])
            hint = page.locator(".msg.bot .text", has_text="I can't message you privately")
            await expect(hint).to_contain_text("Eve", timeout=WAIT_MS)
            await expect(hint).to_contain_text("https://t.me/codemojex_sandbox_bot?start=scores")

            # She follows the link and presses Start: her score, kept, arrives.
            start = {"user": eve, "text": "/start scores"}
            await page.evaluate(CONTROL_JS, [run.token, "/sandbox/say", start])
            await page.reload()
            await open_chat(page, eve, eve)
            await expect(page.locator(".msg.bot .text").filter(has_text="Your guess")).to_have_text(
                [score_text("Eve", LATE, "Your guess: ")], timeout=WAIT_MS
            )
        finally:
            await page.close()

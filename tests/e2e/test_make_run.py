"""``make run`` (``codemojex up``) as a newcomer runs it: a process tree that gets ready, plays a
guess through the sandbox's HTTP API, stops on one Ctrl-C with exit 0 and no stray process, and
after a restart still has the game and the balance."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp

ADA = 1001
GUESS = "/guess 🍎🍌🍒🍇🐶🐱"  # six symbols of the default keyboard


@dataclass
class Run:
    process: asyncio.subprocess.Process
    lines: list[str]
    chat: str
    token: str
    dashboard: str

    def descendants(self) -> set[int]:
        """Every live process below this one (the embedded Valkey, any helper)."""
        parents: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        found, frontier = set(), {self.process.pid}
        while frontier:
            frontier = {pid for pid, parent in parents.items() if parent in frontier}
            found |= frontier
        return found


def alive(pids: set[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


async def read_until(run_lines: list[str], stream: asyncio.StreamReader, marker: str) -> None:
    while not any(marker in line for line in run_lines):
        line = await stream.readline()
        assert line, f"codemojex up exited before {marker!r}:\n{''.join(run_lines)}"
        run_lines.append(line.decode())


def clean_env() -> dict[str, str]:
    """This environment without any setting codemojex reads: the embedded defaults."""
    names = ("TELEGRAM_", "CODEMOJEX_", "ECHOMQ_")
    return {k: v for k, v in os.environ.items() if not k.startswith(names)}


@asynccontextmanager
async def codemojex_up(data_dir: Path) -> AsyncIterator[Run]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-u", "-m", "codemojex.cli", "up", "--data-dir", str(data_dir),
        "--sandbox-port", "0", "--dashboard-port", "0",
        env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    try:
        await asyncio.wait_for(read_until(lines, process.stdout, "codemojex ready"), 90.0)
        text = "".join(lines)
        chat = re.search(r"chat page +(http://127\.0\.0\.1:\d+)/\?token=([\w-]+)", text)
        dashboard = re.search(r"dashboard +(http://127\.0\.0\.1:\d+)/\?token=", text)
        assert chat is not None, text
        assert dashboard is not None, text
        yield Run(process, lines, chat.group(1), chat.group(2), dashboard.group(1))
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        try:
            lines.append((await asyncio.wait_for(process.stdout.read(), 60.0)).decode())
            await asyncio.wait_for(process.wait(), 10.0)
        finally:
            if process.returncode is None:  # it did not stop: leave nothing behind
                process.kill()
                await process.wait()


async def say_and_wait(run: Run, http: aiohttp.ClientSession, text: str, replies: int) -> str:
    """Ada writes ``text``; returns the bot's reply once ``replies`` bot messages exist."""
    async with http.post(f"{run.chat}/sandbox/say", json={"user": ADA, "text": text}) as answer:
        assert answer.status == 200, await answer.text()
    for _ in range(400):  # another process: poll its history with a deadline (20 s)
        async with http.get(f"{run.chat}/sandbox/chats/{ADA}/history") as answer:
            history = (await answer.json())["result"]
        bot = [message for message in history if message["from"]["is_bot"]]
        if len(bot) >= replies:
            return str(bot[replies - 1]["text"])
        await asyncio.sleep(0.05)
    raise AssertionError(f"no reply to {text!r}: {history}")


async def test_make_run_plays_stops_cleanly_and_keeps_the_game(tmp_path: Path) -> None:
    async with codemojex_up(tmp_path) as run:
        ready = [line.split(" ready", 1)[0] for line in run.lines if " ready (" in line]
        for component in ("valkey", "sandbox", "store", "score worker", "notification worker",
                          "command worker", "gateway", "dashboard"):  # fmt: skip
            assert component in ready
        async with aiohttp.ClientSession(headers={"X-Sandbox-Token": run.token}) as http:
            # /play answers with the announcement and the keyboard to compose on, in one message.
            assert "started a new game" in await say_and_wait(run, http, "/play", 1)
            assert re.search(r"Ada: \S+ \d+%", await say_and_wait(run, http, GUESS, 2))
            me = await say_and_wait(run, http, "/me", 3)
            async with http.get(f"{run.dashboard}/metrics") as answer:
                metrics = await answer.text()
        assert "99 📎 clips" in me  # the guess was charged one clip of the 100 granted
        # The game's series beside the engine's, on the dashboard's /metrics.
        assert re.search(r'codemojex_notifications_total\{outcome="delivered"\} [1-9]', metrics)
        assert 'echomq_completed_total{queue="cm"}' in metrics
        children = run.descendants()
        assert children, "the embedded Valkey runs as a child"
        run.process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(run.process.wait(), 60.0) == 0
    output = "".join(run.lines)
    assert output.rstrip().endswith("stopped"), output
    assert not alive(children), output

    async with (
        codemojex_up(tmp_path) as again,
        aiohttp.ClientSession(headers={"X-Sandbox-Token": again.token}) as http,
    ):
        me = await say_and_wait(again, http, "/me", 1)
        board = await say_and_wait(again, http, "/board", 2)
    assert "99 📎 clips" in me, me  # the balance survived the restart (SQLite in the data dir)
    assert "Ada" in board, board  # and so did the game and its board (Valkey's AOF)
    assert again.process.returncode == 0


async def test_a_second_make_run_on_the_same_data_says_so_and_sigterm_stops_cleanly(
    tmp_path: Path,
) -> None:
    async with codemojex_up(tmp_path) as run:
        second = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "codemojex.cli", "up", "--data-dir", str(tmp_path),
            "--sandbox-port", "0", "--dashboard-port", "0", env=clean_env(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        try:
            out, _ = await asyncio.wait_for(second.communicate(), 60.0)
        finally:
            if second.returncode is None:
                second.kill()
                await second.wait()
        assert second.returncode == 2
        assert f"already running on {tmp_path} (pid {run.process.pid})" in out.decode()
        # A service manager's stop (SIGTERM) is as clean as Ctrl-C.
        run.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(run.process.wait(), 60.0) == 0
    output = "".join(run.lines)
    assert output.rstrip().endswith("stopped"), output
    assert "Traceback" not in output, output

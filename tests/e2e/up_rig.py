"""``codemojex up`` as a subprocess for the end-to-end tests: started on a temporary data
directory with free ports, its URLs read from what it prints, stopped by a signal (and killed if
it does not stop), and Ada's conversation with the bot read through the sandbox's HTTP API."""

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
async def codemojex_up(
    data_dir: Path,
    env: dict[str, str] | None = None,
    sandbox_port: int = 0,
    *,
    in_background: bool = False,
) -> AsyncIterator[Run]:
    """``codemojex up`` on ``data_dir`` with the embedded defaults plus ``env``; without a
    Telegram token in ``env`` its sandbox's chat page is ``Run.chat`` (else ``Run.chat`` is ""),
    on ``sandbox_port`` (0: a free one; a restart that keeps a tab's link names the same one).
    ``in_background``: started as a shell starts ``make run &``, with SIGINT ignored (POSIX
    asks that of an asynchronous command without job control; ``exec`` keeps it ignored)."""
    shell = ["sh", "-c", 'trap "" INT; exec "$@"', "sh"] if in_background else []
    process = await asyncio.create_subprocess_exec(
        *shell,
        sys.executable, "-u", "-m", "codemojex.cli", "up", "--data-dir", str(data_dir),
        "--sandbox-port", str(sandbox_port), "--dashboard-port", "0",
        env={**clean_env(), **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    try:
        await asyncio.wait_for(read_until(lines, process.stdout, "codemojex ready"), 90.0)
        text = "".join(lines)
        chat = re.search(r"chat page +(http://127\.0\.0\.1:\d+)/\?token=([\w-]+)", text)
        dashboard = re.search(r"dashboard +(http://127\.0\.0\.1:\d+)/\?token=", text)
        assert dashboard is not None, text
        if env and "TELEGRAM_BOT_TOKEN" in env:
            yield Run(process, lines, "", "", dashboard.group(1))
            return
        assert chat is not None, text
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


async def say_and_wait(run: Run, http: aiohttp.ClientSession, text: str) -> str:
    """Ada writes ``text``; returns the bot's first message after it (the chat's history is kept
    across restarts, so replies are told by their place after the message, not by a count)."""
    async with http.post(f"{run.chat}/sandbox/say", json={"user": ADA, "text": text}) as answer:
        assert answer.status == 200, await answer.text()
        said = (await answer.json())["result"]["message"]["message_id"]
    for _ in range(400):  # another process: poll its history with a deadline (20 s)
        async with http.get(f"{run.chat}/sandbox/chats/{ADA}/history") as answer:
            history = (await answer.json())["result"]
        after = [m for m in history if m["from"]["is_bot"] and m["message_id"] > said]
        if after:
            return str(after[0]["text"])
        await asyncio.sleep(0.05)
    raise AssertionError(f"no reply to {text!r}: {history}")

"""``codemojex bot`` as a process: with no token it runs on an in-process sandbox (and with no
``ECHOMQ_URL`` on its own embedded Valkey), prints one
ready line per component, answers a command sent through the sandbox's control API, keeps the
token out of its output, and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from pathlib import Path

import aiohttp

COMPONENTS = (
    "valkey",
    "sandbox",
    "engine",
    "store",
    "bot",
    "score worker",
    "settle worker",
    "notification worker",
    "command worker",
    "sweeper",
    "gateway",
)


async def read_until(stream: asyncio.StreamReader, marker: str, lines: list[str]) -> None:
    while not any(marker in line for line in lines):
        line = await stream.readline()
        assert line, f"the bot exited before {marker!r}: {lines}"
        lines.append(line.decode())


async def test_codemojex_bot_runs_on_the_sandbox_and_stops_cleanly(tmp_path: Path) -> None:
    # Its own embedded Valkey and SQLite in tmp_path: the bot's queues carry no test prefix.
    names = ("TELEGRAM_", "CODEMOJEX_", "ECHOMQ_URL")
    env = {k: v for k, v in os.environ.items() if not k.startswith(names)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-u", "-m", "codemojex.cli", "bot", "--data-dir", str(tmp_path),
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    try:
        await asyncio.wait_for(read_until(process.stdout, "gateway ready", lines), 60.0)
        ready = [line.split(" ready", 1)[0] for line in lines if " ready" in line]
        assert ready == list(COMPONENTS)
        page = next(line for line in lines if "sandbox chat page:" in line)
        match = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=([\w-]+)", page)
        assert match is not None
        base, token = match.groups()
        async with aiohttp.ClientSession(headers={"X-Sandbox-Token": token}) as http:
            async with http.post(f"{base}/sandbox/say", json={"user": 1001, "text": "/help"}):
                pass
            for _ in range(200):  # poll the history with a deadline (a process: no events here)
                async with http.get(f"{base}/sandbox/chats/1001/history") as response:
                    history = (await response.json())["result"]
                if len(history) >= 2:
                    break
                await asyncio.sleep(0.05)
        assert "/convert" in history[-1]["text"]
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        rest = await asyncio.wait_for(process.stdout.read(), 30.0)
        code = await process.wait()
    output = "".join(lines) + rest.decode()
    assert code == 0, output
    assert output.rstrip().endswith("stopped")
    assert "100000:sandbox" not in output  # the sandbox's bot token is never printed


def _bare_env(**extra: str) -> dict[str, str]:
    names = ("TELEGRAM_", "CODEMOJEX_", "ECHOMQ_URL")
    env = {k: v for k, v in os.environ.items() if not k.startswith(names)}
    return {**env, **extra}


async def _run_bot(tmp_path: Path, env: dict[str, str], *argv: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-u", "-m", "codemojex.cli", "bot", "--data-dir", str(tmp_path), *argv,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        output, _ = await asyncio.wait_for(process.communicate(), 90.0)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_a_webhook_port_in_use_is_a_one_line_error_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, output = await _run_bot(
            tmp_path, _bare_env(), "--mode", "webhook", "--webhook-port", str(port)
        )
    assert code == 2, output
    assert "Traceback" not in output
    last = output.rstrip().splitlines()[-1]
    assert last.startswith("codemojex bot: cannot start:")
    assert "address already in use" in last


async def test_a_bad_webhook_secret_is_a_one_line_error_and_exit_2(tmp_path: Path) -> None:
    env = _bare_env(TELEGRAM_WEBHOOK_SECRET="not a secret!")
    code, output = await _run_bot(tmp_path, env, "--mode", "webhook")
    assert code == 2, output
    assert "Traceback" not in output
    assert output.strip().startswith("codemojex bot: TELEGRAM_WEBHOOK_SECRET")
    assert "not a secret!" not in output  # the secret itself is never printed

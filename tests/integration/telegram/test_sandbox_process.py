"""The sandbox as a process of its own (``python -m codemojex.telegram.sandbox``): it says where
it listens, serves the Bot API and the control API, and stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from urllib.parse import parse_qs, urlsplit

import aiohttp

#: Seconds for the process to start: importing aiogram alone took 50 s on a loaded 2-core
#: machine, so this is a deadline against a hang, not a measure of speed.
STARTUP = 120


async def reap(process: asyncio.subprocess.Process) -> None:
    """Kill the process if it still runs and read its pipes to the end: pipes left unread keep
    their transports open past the test (a leak the next test's collection reports)."""
    if process.returncode is None:
        process.kill()
    await process.communicate()


async def test_the_sandbox_process_serves_and_stops_on_sigterm() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "codemojex.telegram.sandbox",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(STARTUP):
            base = (await process.stdout.readline()).decode().split()[-1]
            page = (await process.stdout.readline()).decode().split()[-1]
        token = parse_qs(urlsplit(page).query)["token"][0]
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/bot100000:sandbox/getMe") as response:
                assert (await response.json())["result"]["is_bot"] is True
            headers = {"X-Sandbox-Token": token}
            async with http.get(f"{base}/sandbox/state", headers=headers) as response:
                assert response.status == 200
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            assert await process.wait() == 0
        assert process.stderr is not None
        assert b"100000:sandbox" not in await process.stderr.read()
    finally:
        await reap(process)


async def test_a_bad_option_is_refused_with_a_usage_error() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "codemojex.telegram.sandbox",
        "--bot-token",
        "no-colon",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(STARTUP):
            _, stderr = await process.communicate()
    finally:
        await reap(process)
    assert process.returncode == 2
    assert b"bot_token must look like" in stderr

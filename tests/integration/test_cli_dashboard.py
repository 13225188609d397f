"""``echomq dashboard`` as a process: it prints its URL once (with a generated token, or a
placeholder when the token came from the environment), serves, and stops cleanly on SIGINT."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys

import aiohttp

from echomq.engine.queue import Queue


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _start(url: str, queue: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    port = str(_free_port())
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "echomq.cli", "--url", url, "dashboard", "--queue", queue,
        "--port", port,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip


async def _stop(process: asyncio.subprocess.Process) -> int:
    process.send_signal(signal.SIGINT)
    return await asyncio.wait_for(process.wait(), 30)


async def test_dashboard_prints_its_url_with_a_fresh_token_and_serves(
    queue: Queue, valkey_url: str
) -> None:
    await queue.enqueue(1, lane="seen")
    env = {k: v for k, v in os.environ.items() if k != "ECHOMQ_DASHBOARD_TOKEN"}
    process = await _start(valkey_url, queue.name, env)
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode().strip()
        assert line.startswith("echomq dashboard: http://127.0.0.1:")
        url = line.split(" ", 2)[2]
        base, token = url.split("/?token=")
        assert len(token) >= 16
        async with aiohttp.ClientSession() as http:
            deadline = asyncio.get_running_loop().time() + 30
            while True:  # the URL is printed just before uvicorn binds
                try:
                    async with http.get(base + "/api/snapshot") as response:
                        snapshot = await response.json()
                    break
                except aiohttp.ClientConnectionError:
                    assert asyncio.get_running_loop().time() < deadline
                    await asyncio.sleep(0.05)
            assert snapshot["queues"][0]["lanes"][0]["group"] == "seen"
            pause = f"{base}/api/queues/{queue.name}/lanes/seen/pause"
            async with http.post(pause, headers={"X-Dashboard-Token": token}) as response:
                assert response.status == 200
            assert (await queue.lane("seen").info()).paused
            # An open event stream must not hold the shutdown.
            async with http.get(base + "/events") as stream:
                assert (await stream.content.readline()).startswith(b"data: ")
                code = await _stop(process)
    finally:
        if process.returncode is None:
            await _stop(process)
    assert code == 0
    assert process.stderr is not None
    assert b"Traceback" not in await process.stderr.read()


async def test_a_token_from_the_environment_is_not_printed(queue: Queue, valkey_url: str) -> None:
    secret = "env-token-that-must-stay-off-screen"
    process = await _start(valkey_url, queue.name, {**os.environ, "ECHOMQ_DASHBOARD_TOKEN": secret})
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        assert "token=<ECHOMQ_DASHBOARD_TOKEN>" in line
    finally:
        await _stop(process)
    assert process.stderr is not None
    assert secret not in line + (await process.stderr.read()).decode()


async def test_a_bad_queue_name_exits_2_before_serving(valkey_url: str) -> None:
    process = await _start(valkey_url, "no spaces", dict(os.environ))
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    assert b"invalid queue" in err
    assert out == b""

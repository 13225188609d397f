"""``make run`` (``codemojex up``) as a newcomer runs it: a process tree that gets ready, plays a
guess through the sandbox's HTTP API, prints the ``echomq`` line that reads its queues, stops on
one SIGINT with exit 0 and no stray process (even started in the background, where the shell
ignores SIGINT for it), and after a restart still has the game and the balance."""

from __future__ import annotations

import asyncio
import re
import shlex
import signal
import sys
from pathlib import Path

import aiohttp
from up_rig import GUESS, alive, clean_env, codemojex_up, say_and_wait


def _dashboard_token(lines: list[str]) -> str:
    [token] = re.findall(r"  dashboard  \S+/\?token=(\S+)", "".join(lines))
    return token


async def test_make_run_plays_stops_cleanly_and_keeps_the_game(tmp_path: Path) -> None:
    async with codemojex_up(tmp_path, in_background=True) as run:
        ready = [line.split(" ready", 1)[0] for line in run.lines if " ready (" in line]
        for component in ("valkey", "sandbox", "store", "score worker", "notification worker",
                          "command worker", "gateway", "dashboard"):  # fmt: skip
            assert component in ready
        async with aiohttp.ClientSession(headers={"X-Sandbox-Token": run.token}) as http:
            # /play answers with the announcement and the keyboard to compose on, in one message.
            assert "started a new game" in await say_and_wait(run, http, "/play")
            assert re.search(r"Ada: \S+ → \S+ \d+%", await say_and_wait(run, http, GUESS))
            me = await say_and_wait(run, http, "/me")
            async with http.get(f"{run.dashboard}/metrics") as answer:
                metrics = await answer.text()
            async with http.get(f"{run.dashboard}/favicon.ico") as answer:
                assert answer.status == 200  # no 404 in the log for every browser tab
        assert "99 📎 clips" in me  # the guess was charged one clip of the 100 granted
        # The game's series beside the engine's, on the dashboard's /metrics.
        assert re.search(r'codemojex_notifications_total\{outcome="delivered"\} [1-9]', metrics)
        assert 'echomq_completed_total{queue="cm"}' in metrics
        # The line an operator pastes to read the game's queues, run as printed in a shell
        # without the venv on PATH (no ECHOMQ_URL: its --url alone names the embedded Valkey).
        [inspect] = [line.split("inspect", 1)[1] for line in run.lines if "  inspect  " in line]
        [port] = re.findall(r"valkey ready \(\S+ on 127\.0\.0\.1:(\d+)", "".join(run.lines))
        argv = shlex.split(inspect)
        assert argv[-4:] == ["--url", f"valkey://127.0.0.1:{port}/0", "stats", "cm.notify"]
        assert Path(argv[0]).is_absolute()  # the venv's echomq (or python -m echomq)
        stats = await asyncio.create_subprocess_exec(
            *argv, env={**clean_env(), "PATH": "/usr/bin:/bin"},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        table = (await asyncio.wait_for(stats.communicate(), 60.0))[0].decode()
        assert stats.returncode == 0, table
        assert re.search(r"pending\W+\d+", table), table
        assert re.search(r"completed\W+\d+", table), table
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
        me = await say_and_wait(again, http, "/me")
        board = await say_and_wait(again, http, "/board")
    assert "99 📎 clips" in me, me  # the balance survived the restart (SQLite in the data dir)
    assert again.token == run.token  # and the chat page's link (the sandbox's data dir)
    assert _dashboard_token(again.lines) == _dashboard_token(run.lines)  # and the dashboard's
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

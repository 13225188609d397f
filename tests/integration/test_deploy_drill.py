"""The deploy drill (issue 24): a lane at rate(5, 1.0) and limit(2), two producer processes and
two worker processes restarted one at a time every 2 s, each process applying the lane policies
at start. From the engine's own clock (each job's claim ms, its lease deadline minus the lease,
and its ``finished`` ms), in either mode: no window over the rate (fixed windows as the engine
opens them in fixed mode; every sliding window in smooth mode), never more than 2 leased at once.

The lean run takes ~8 s a mode; ``ECHOMQ_TEST_FULL_SCALE=1`` runs the issue's 20 s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from echomq import Queue
from echomq.testing import discard

HERE = Path(__file__).resolve().parent
SECONDS = 20.0 if os.environ.get("ECHOMQ_TEST_FULL_SCALE") == "1" else 8.0
RESTART_EVERY = 2.0
MAX, WINDOW_MS, LIMIT = 5, 1000, 2


async def spawn(role: str, url: str, queue: str, mode: str) -> asyncio.subprocess.Process:
    env = dict(os.environ)
    env.update(ECHOMQ_TEST_URL=url, ECHOMQ_TEST_QUEUE=queue, ECHOMQ_TEST_MODE=mode)
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / "drill_app.py"), role, env=env, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    assert await process.stdout.readline() == b"up\n"  # its loop runs: SIGTERM is handled
    return process


async def stop(process: asyncio.subprocess.Process) -> None:
    process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(process.wait(), 30) == 0


def fixed_windows_over(claims: list[int]) -> list[list[int]]:
    """The windows as a fixed-window limiter opens them (at the first claim after the last
    one ended, lasting WINDOW_MS) that hold more than MAX claims."""
    over, start, inside = [], None, []
    for t in claims:
        # The counter's expiry runs on the script's clock, up to 1 ms before its TIME: a claim
        # in a window's last ms may open the next one.
        if start is None or t >= start + WINDOW_MS - 1:
            if len(inside) > MAX:
                over.append(inside)
            start, inside = t, []
        inside.append(t)
    return over + ([inside] if len(inside) > MAX else [])


def sliding_windows_over(claims: list[int]) -> list[list[int]]:
    """Every window [t, t + WINDOW_MS) opening at a claim that holds more than MAX claims."""
    return [
        window
        for i, t in enumerate(claims)
        if len(window := [u for u in claims[i:] if u < t + WINDOW_MS]) > MAX
    ]


def most_leased(spans: list[tuple[int, int]]) -> int:
    """The most jobs leased at once: a completion at ms t frees its slot before a claim at t."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


@pytest.mark.parametrize("mode", ["fixed", "smooth"])
async def test_deploy_drill_keeps_the_lane_rate_and_limit_through_rolling_restarts(
    valkey_url: str, queue_name: str, mode: str
) -> None:
    queue = await Queue.connect(valkey_url, queue_name)
    try:
        producers = [await spawn("producer", valkey_url, queue_name, mode) for _ in range(2)]
        workers = [await spawn("worker", valkey_url, queue_name, mode) for _ in range(2)]
        loop = asyncio.get_running_loop()
        end, turn = loop.time() + SECONDS, 0
        while loop.time() < end:
            await asyncio.sleep(RESTART_EVERY)  # a deploy's cadence: nothing to wait on
            await stop(workers[turn % 2])
            workers[turn % 2] = await spawn("worker", valkey_url, queue_name, mode)
            turn += 1
        for process in producers + workers:
            await stop(process)
        ids = [i.decode() for i in await queue.wire.call("ZRANGE", queue.keys.done, 0, -1)]
        rows = [await queue.job(i) for i in ids]
        spans = [(int(r.result), round(r.finished * 1000)) for r in rows if r is not None]
    finally:
        await discard(queue)
    claims = sorted(start for start, _ in spans)
    assert turn >= 3
    # Liveness, not throughput: a quarter of the rate's budget. Every restart costs a process
    # start (a second or more when the host is loaded), and the drill restarts every 2 s; a
    # half-budget floor failed once with 15 of 20 under three benchmarks beside it.
    assert len(claims) >= SECONDS * MAX / 4
    over = fixed_windows_over(claims) if mode == "fixed" else sliding_windows_over(claims)
    assert over == [], f"{len(over)} windows over {MAX} claims per {WINDOW_MS} ms"
    assert most_leased(spans) <= LIMIT

"""``echomq worker module:app`` as a process: serving an App's two queues until drained
(``--burst``), and ``--processes 2`` restarting a killed child and stopping on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from echomq import Queue

HERE = Path(__file__).resolve().parent


def worker(url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "echomq", "--url", url, "worker", "task_app:app", *extra]


def environment(queue: str, marker: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    env["ECHOMQ_TEST_QUEUE"] = queue
    env["ECHOMQ_TEST_MARKER"] = str(marker)
    return env


async def announced(marker: Path, count: int, timeout: float = 20.0) -> list[int]:
    """The pids of the worker processes that ran their startup hook, once there are ``count``.
    Another process's progress has no event to wait on: polled."""
    deadline = asyncio.get_running_loop().time() + timeout
    while len(pids := sorted(int(name) for name in os.listdir(marker))) < count:
        assert asyncio.get_running_loop().time() < deadline, f"only {pids} started"
        await asyncio.sleep(0.05)
    return pids


def is_running(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


async def test_a_burst_worker_serves_both_queues_of_the_app_and_exits_when_drained(
    valkey_url: str, queue_name: str, tmp_path: Path
) -> None:
    main = await Queue.connect(valkey_url, queue_name)
    other = await Queue.connect(valkey_url, f"{queue_name}-other")
    try:
        summed = await main.enqueue({"task": "add", "args": {"a": 2, "b": 3}})
        asked = await other.enqueue({"task": "whoami", "args": {}})
        process = await asyncio.create_subprocess_exec(
            *worker(valkey_url, "--burst", "--beat", "0.1"),
            env=environment(queue_name, tmp_path),
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(process.communicate(), 30)
        assert process.returncode == 0, err.decode()
        log = err.decode()
        assert f"queues {queue_name}, {queue_name}-other" in log
        assert "tasks add, whoami; concurrency 4; burst" in log
        (pid,) = await announced(tmp_path, 1)
        done = await main.wait(summed.id, 5)
        assert done is not None
        assert (done.state, done.result) == ("completed", 5)
        done = await other.wait(asked.id, 5)
        assert done is not None
        assert (done.state, done.result) == ("completed", pid)
    finally:
        for queue in (main, other):
            await queue.pause()
            await queue.obliterate(force=True)
            await queue.close()


async def test_processes_restart_a_killed_child_and_all_stop_on_sigterm(
    valkey_url: str, queue_name: str, tmp_path: Path
) -> None:
    other = await Queue.connect(valkey_url, f"{queue_name}-other")
    supervisor = await asyncio.create_subprocess_exec(
        *worker(valkey_url, "--processes", "2", "--beat", "0.1", "--stop-timeout", "2"),
        env=environment(queue_name, tmp_path),
    )
    try:
        first, second = await announced(tmp_path, 2)
        os.kill(first, signal.SIGKILL)
        pids = await announced(tmp_path, 3)  # the supervisor started a replacement
        (replacement,) = set(pids) - {first, second}
        asked = await other.enqueue({"task": "whoami", "args": {}})
        done = await other.wait(asked.id, 10)
        assert done is not None
        assert done.state == "completed"
        assert done.result in (second, replacement)
        supervisor.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(supervisor.wait(), 15) == 0
        assert not is_running(second)
        assert not is_running(replacement)
    finally:
        if supervisor.returncode is None:
            supervisor.kill()
            await supervisor.wait()
        await other.pause()
        await other.obliterate(force=True)
        await other.close()
        main = await Queue.connect(valkey_url, queue_name)
        await main.obliterate(force=True)
        await main.close()


async def test_a_burst_worker_runs_on_uvloop_when_asked(
    valkey_url: str, queue_name: str, tmp_path: Path
) -> None:
    main = await Queue.connect(valkey_url, queue_name)
    try:
        summed = await main.enqueue({"task": "add", "args": {"a": 4, "b": 5}})
        process = await asyncio.create_subprocess_exec(
            *worker(
                valkey_url, "--burst", "--beat", "0.1", "--loop", "uvloop", "--queue", queue_name
            ),
            env=environment(queue_name, tmp_path),
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(process.communicate(), 30)
        assert process.returncode == 0, err.decode()
        assert "echomq worker: event loop uvloop" in err.decode()
        done = await main.wait(summed.id, 5)
        assert done is not None
        assert (done.state, done.result) == ("completed", 9)
    finally:
        await main.pause()
        await main.obliterate(force=True)
        await main.close()

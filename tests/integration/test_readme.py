"""The README's examples run as written (against the test server): the task API's dozen lines
with a real ``echomq worker`` subprocess, and the engine's twenty lines."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import echomq
from echomq import Queue

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_first_block_is_the_task_api_and_runs_with_a_worker(
    valkey_url: str, queue_name: str, tmp_path: Path
) -> None:
    code = _blocks()[0]
    assert code.startswith("# emailapp.py\n")
    assert "@app.task(" in code
    assert len(code.strip().splitlines()) <= 20
    code = code.replace("valkey://127.0.0.1:6379", valkey_url).replace('"email"', repr(queue_name))
    (tmp_path / "emailapp.py").write_text(code)  # the worker imports it as written
    # Only the echomq under test on the path (not the checkout's tests or an other install).
    env = {**os.environ, "PYTHONPATH": str(Path(echomq.__file__).resolve().parents[1])}
    worker = subprocess.Popen(
        [sys.executable, "-m", "echomq", "worker", "emailapp:app"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = subprocess.run(
            [sys.executable, "emailapp.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        _, log = worker.communicate(timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "enqueued sent 'Welcome' to ceo@acme.test\n"
    assert worker.returncode == 0, log

    async def cleanup() -> None:
        queue = await Queue.connect(valkey_url, queue_name)
        assert [lane.lane for lane in await queue.lanes()] == ["acme"]
        assert (await queue.counts()).completed == 1
        await queue.pause()
        await queue.obliterate(force=True)
        await queue.close()

    asyncio.run(cleanup())


def test_readme_engine_example_runs_and_serves_every_job(valkey_url: str, queue_name: str) -> None:
    code = next(block for block in _blocks() if "queue.claim(" in block)
    assert len(code.strip().splitlines()) <= 20
    code = code.replace("valkey://127.0.0.1:6379", valkey_url).replace('"emails"', repr(queue_name))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
    lines = out.getvalue().splitlines()
    assert len(lines) == 101  # every job served once
    assert lines[0] == "_ {'to': 'u0'}"  # ring order: the default lane was admitted first
    assert "tenant-b {'to': 'ceo'}" in lines

    async def cleanup() -> None:
        queue = await Queue.connect(valkey_url, queue_name, pool_size=1)
        assert (await queue.counts()).completed == 101
        await queue.pause()
        await queue.obliterate(force=True)
        await queue.close()

    asyncio.run(cleanup())

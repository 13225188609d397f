"""The README's twenty-line example runs as written (against the test server)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path

from echomq import Queue

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs_and_serves_every_job(valkey_url: str, queue_name: str) -> None:
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert block, "README.md has no python example"
    code = block.group(1)
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

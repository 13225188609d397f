"""The dashboard's job view against a real Valkey: a running job's progress and the newest
lines of its log, as a task reports them, read through the same app the page polls; bad ids,
bad line counts and missing jobs are refused without reading anything."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from echomq import Queue
from echomq.dashboard import create_app
from echomq.testing import claim_job, serve_app

TOKEN = "dashboard-token-for-tests-0123456789"


@pytest.fixture
async def get(queue: Queue) -> AsyncIterator[Any]:
    app = create_app(queue.wire, [queue.name], TOKEN, interval=0.05)
    async with serve_app(app) as base, aiohttp.ClientSession() as http:

        async def fetch(path: str) -> tuple[int, Any]:
            async with http.get(base + path) as response:
                return response.status, await response.json()

        yield fetch


async def test_a_running_jobs_progress_and_last_log_lines_are_shown(queue: Queue, get: Any) -> None:
    await queue.enqueue({"rows": 5}, lane="imports")
    job = await claim_job(queue)
    await queue.progress(job, value={"done": 2, "of": 5}, log=["start", "row 1", "row 2"])
    status, shown = await get(f"/api/queues/{queue.name}/jobs/{job.id}?lines=2")
    assert status == 200
    assert shown["state"] == "active"
    assert (shown["group"], shown["attempts"]) == ("imports", 1)
    assert shown["progress"] == {"done": 2, "of": 5}
    assert shown["logs"] == ["row 1", "row 2"]  # the newest two, oldest first
    await queue.progress(job, log="row 3")
    status, again = await get(f"/api/queues/{queue.name}/jobs/{job.id}")
    assert again["logs"] == ["start", "row 1", "row 2", "row 3"]  # default: the last 20
    assert await queue.retry(job, max_attempts=1, error="boom") == "dead"
    status, dead = await get(f"/api/queues/{queue.name}/jobs/{job.id}")
    assert (dead["state"], dead["last_error"]) == ("dead", "boom")
    assert dead["progress"] == {"done": 2, "of": 5}  # kept with the row


async def test_the_job_view_refuses_bad_input_and_says_what_is_missing(
    queue: Queue, get: Any
) -> None:
    await queue.enqueue("x")
    job = await claim_job(queue)
    base = f"/api/queues/{queue.name}/jobs"
    for lines in ("0", "101", "-1", "ten"):
        status, answer = await get(f"{base}/{job.id}?lines={lines}")
        assert status == 400
        assert "lines" in answer["error"]
    status, answer = await get(f"{base}/not-a-job")
    assert status == 400
    assert "job id" in answer["error"]
    status, answer = await get(f"{base}/JOB0000000000A")
    assert status == 404
    status, answer = await get(f"/api/queues/elsewhere/jobs/{job.id}")
    assert status == 404

"""Structured logs: ``echomq worker --log-format json`` writes one JSON object per line with the
job's queue, lane, id and attempt on every line about a job (the task's own lines too), and no
log line of the worker, text or JSON, shows the server's password or a dashboard token."""

from __future__ import annotations

import io
import json
import logging
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from echomq import App, AppWorker, ConsumerOptions, Fixed, context
from echomq.logs import JobFilter, JsonFormatter
from echomq.server import EmbeddedValkey, ServerOptions
from echomq.testing import discard

HERE = Path(__file__).resolve().parent


@pytest.fixture
def guarded() -> Iterator[EmbeddedValkey]:
    """A server of its own with a password (the queue name log_app uses is its alone)."""
    with EmbeddedValkey(ServerOptions(password=secrets.token_urlsafe(18))) as server:
        yield server


def run_worker(url: str, log_format: str, token: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    env["ECHOMQ_DASHBOARD_TOKEN"] = token
    command = [sys.executable, "-m", "echomq", "--url", url, "worker", "log_app:app"]
    command += ["--burst", "--log-format", log_format, "--log-level", "DEBUG"]
    command += ["--backoff-base", "0.01", "--backoff-cap", "0.01", "--beat", "0.2"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def enqueue_bill(url: str) -> str:
    """Enqueue log_app's task as another service would: its own declaration of the task."""
    producer = App(url, queue="log-app")

    @producer.task(name="bill", lane="tenant")
    async def bill(tenant: str, amount: int) -> int:
        raise NotImplementedError  # runs on the worker

    return bill.enqueue_sync("acme", 42).id


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_the_worker_never_logs_the_password_or_the_dashboard_token(
    guarded: EmbeddedValkey, log_format: str
) -> None:
    password = urlsplit(guarded.url).password
    assert password  # the URL the worker is given holds it
    token = secrets.token_urlsafe(24)
    job = enqueue_bill(guarded.url)
    done = run_worker(guarded.url, log_format, token)
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert "billing acme" in output  # the task ran twice and its lines were written
    assert "could not reach valkey://:***@" in output  # the error named the URL: redacted
    assert "?token=***" in output
    assert password not in output
    assert token not in output
    if log_format == "json":
        lines = [json.loads(line) for line in done.stderr.splitlines()]
        about = [line for line in lines if line.get("job_id") == job]
        assert {line["attempt"] for line in about} == {1, 2}
        assert all(line["queue"] == "log-app" and line["lane"] == "acme" for line in about)
        assert all(line["trace_id"] is None for line in about)
        # the task's own lines, the consumer's line about the failed attempt (with the
        # traceback, redacted too)
        assert next(m["message"] for m in about if m["logger"] == "log_app") == "billing acme"
        failed = [m for m in about if m["logger"] == "echomq.consumer"]
        assert failed
        assert failed[0]["level"] == "ERROR"
        assert "ConnectionError: could not reach valkey://:***@" in failed[0]["exception"]
        assert {"time", "level", "logger", "message"} <= set(lines[0])
        assert "job_id" not in lines[0]  # the start-up line is about no job


async def test_an_applications_handler_formats_task_lines_with_the_jobs_fields(
    valkey_url: str, queue_name: str
) -> None:
    app = App(valkey_url, queue=queue_name)
    stream, text = io.StringIO(), io.StringIO()
    as_json = logging.StreamHandler(stream)
    as_json.setFormatter(JsonFormatter())
    plain = logging.StreamHandler(text)
    plain.addFilter(JobFilter())
    plain.setFormatter(logging.Formatter("%(job_id)s %(lane)s %(attempt)s %(message)s"))
    mine = logging.getLogger("myapp.billing")
    mine.setLevel(logging.INFO)
    for handler in (as_json, plain):
        mine.addHandler(handler)

    @app.task(lane="tenant")
    async def invoice(tenant: str) -> str:
        mine.info("invoicing %s", tenant)
        return context().job.id

    try:
        handle = await invoice.enqueue("acme")
        await AppWorker(app, options=ConsumerOptions(beat=0.1, backoff=Fixed(0))).run_until_idle()
        mine.info("outside any task")
    finally:
        for handler in (as_json, plain):
            mine.removeHandler(handler)
        await discard(app.queue(queue_name))
        await app.close()
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert inside["message"] == "invoicing acme"
    assert (inside["queue"], inside["lane"], inside["job_id"]) == (queue_name, "acme", handle.id)
    assert (inside["attempt"], inside["trace_id"], inside["logger"]) == (1, None, "myapp.billing")
    assert outside["message"] == "outside any task"
    assert "job_id" not in outside
    assert text.getvalue().splitlines() == [
        f"{handle.id} acme 1 invoicing acme",
        "None None None outside any task",
    ]

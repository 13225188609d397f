"""Every program under examples/ runs here, against the session's real Valkey, and what it
shows is checked: the FastAPI app, the pre-forking sync producer, Django views, per-tenant
rates, priority bands, cooling a lane, a tenant's ETA, results, progress and logs, abort, flows,
ordered lanes, batch tasks, periodic tasks, the dashboard mounted in an ASGI app, and the
documentation site's programs (the quickstart with a real ``echomq worker``, the fair worker, a
raw consumer, token buckets, scheduling, retries and dead letters). tests/unit/test_docs_blocks.py
lets a docs page include an example only if this file names it."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

import echomq
from echomq import AppWorker, Policy, Queue
from echomq.testing import discard, serve_app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SOURCE = Path(echomq.__file__).resolve().parents[1]  # the folder the echomq under test is in


def run(script: str, url: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        env={**os.environ, "ECHOMQ_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def forget(url: str, *names: str) -> None:
    for name in names:
        await discard(await Queue.connect(url, name))


@pytest.fixture
def emailapp(valkey_url: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example package, imported with its App pointed at the test server."""
    monkeypatch.setenv("ECHOMQ_URL", valkey_url)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    for name in [m for m in sys.modules if m == "emailapp" or m.startswith("emailapp.")]:
        del sys.modules[name]
    return importlib.import_module("emailapp.web")


@pytest.fixture
async def clean(valkey_url: str) -> AsyncIterator[None]:
    yield
    await forget(
        valkey_url,
        *("email", "rates-demo", "results-demo", "progress-demo", "batch-demo", "periodic-demo"),
        *("abort-demo", "flows-demo", "flows-demo-media", "quickstart", "fair-demo"),
        *("consumer-demo", "buckets-demo", "schedule-demo", "retries-demo", "hooks-demo"),
        *("sync-demo", "ordered-demo", "sms-demo", "mail-demo", "cooling-demo", "priority-demo"),
        "eta-demo",
    )


# On uvloop too: the default loop of uvicorn[standard] and `fastapi run` (docs/guides/fastapi.md).
@pytest.mark.every_loop
async def test_fastapi_app_enqueues_on_the_tenants_lane_and_serves_the_result(
    emailapp: ModuleType, clean: None
) -> None:
    tasks = sys.modules["emailapp.tasks"]
    async with serve_app(emailapp.api) as base, httpx.AsyncClient(base_url=base) as http:
        posted = await http.post(
            "/tenants/acme/emails", json={"to": "a@acme.test", "subject": "hi"}
        )
        assert posted.status_code == 202
        job = posted.json()
        assert job["verdict"] == "enqueued"
        email = tasks.app.queue("email")
        lanes = {lane.lane: lane.depth for lane in await email.lanes() if lane.depth}
        assert lanes == {"acme": 1}
        # The lifespan's connect applied the app's lane policies.
        assert (await email.policies()).lanes["acme"] == Policy(rate=(5, 1.0), limit=2)
        await AppWorker(tasks.app).run_until_idle()
        got = await http.get(f"/emails/{job['id']}", params={"wait": 5})
    assert got.json() == {
        "id": job["id"],
        "state": "completed",
        "result": {"accepted": "a@acme.test", "attempt": "1"},
    }
    assert tasks.OUTBOX[-1] == {"tenant": "acme", "to": "a@acme.test", "subject": "hi"}


async def test_fastapi_app_takes_any_tenant_name_and_answers_a_refusal_with_422(
    emailapp: ModuleType, clean: None
) -> None:
    tasks = sys.modules["emailapp.tasks"]
    tenant = "billing+eu@acme.test"  # a plus-address: once an HTTP 500, now a lane like any
    body = {"to": "a@acme.test", "subject": "hi"}
    async with serve_app(emailapp.api) as base, httpx.AsyncClient(base_url=base) as http:
        posted = await http.post(f"/tenants/{tenant}/emails", json=body)
        assert posted.status_code == 202
        email = tasks.app.queue("email")
        lanes = {lane.lane: lane.depth for lane in await email.lanes() if lane.depth}
        assert lanes == {tenant: 1}
        refused = await http.post(f"/tenants/{'x' * 2000}/emails", json=body)
    assert refused.status_code == 422
    assert refused.json()["argument"] == "lane"


async def test_sync_producer_survives_the_fork_of_a_preforking_server(
    valkey_url: str, clean: None
) -> None:
    out = run("sync_producer.py", valkey_url)
    assert "worker 0: enqueued 50 emails" in out
    assert "worker 1: enqueued 50 emails" in out
    queue = await Queue.connect(valkey_url, "email")
    try:
        lanes = {lane.lane: lane.depth for lane in await queue.lanes() if lane.depth}
    finally:
        await queue.close()
    assert lanes == {"acme": 1, "tenant-0": 50, "tenant-1": 50}  # every job once, none lost


async def test_django_views_enqueue_and_read_a_job_through_the_url_resolver(
    valkey_url: str, clean: None
) -> None:
    out = run("django_views.py", valkey_url).splitlines()
    assert out[:2] == ["POST 202 enqueued", "GET before the worker: pending"]
    assert out[2] == (
        "GET after the worker: {'state': 'completed', "
        "'result': {'accepted': 'ceo@acme.test', 'attempt': '1'}}"
    )
    assert out[3].startswith("GET a malformed id: 400 invalid job id 'not-a-job'")


async def test_tenant_rates_hold_acme_at_five_a_second(valkey_url: str, clean: None) -> None:
    lines = dict(line.split(": ", 1) for line in run("tenant_rates.py", valkey_url).splitlines())
    acme_sent, acme_span = lines["acme"].split(" sent over ")
    assert acme_sent == "10"
    # Ten claims at five per one-second window need a second window: at least ~1 s apart.
    assert float(acme_span.removesuffix(" s")) >= 0.9
    assert lines["zen"].startswith("40 sent")


async def test_cooling_holds_only_the_throttled_tenant_and_spends_no_attempt(
    valkey_url: str, clean: None
) -> None:
    out = run("cooling.py", valkey_url).splitlines()
    # zen went out while acme's lane cooled; acme's refused job first once it ended.
    assert out[:3] == ["zen 0 before the cool", "zen 1 before the cool", "zen 2 before the cool"]
    # Both of acme's were in hand at the 429 (one claim took the lanes' heads): both cooled.
    assert out[3:] == ["acme 0 after the cool", "acme 1 after the cool", "cooled 2, dead 0"]


async def test_priorities_serve_the_page_first_and_the_lanes_in_turn_in_each_band(
    valkey_url: str, clean: None
) -> None:
    out = run("priorities.py", valkey_url).splitlines()
    assert out == [
        "zen: PAGE: the database is down",
        *("acme: hello", "zen: hello"),
        *("acme: digest 1", "zen: digest 1", "acme: digest 2", "zen: digest 2"),
    ]


async def test_tenant_eta_shows_each_tenants_place_and_wait(valkey_url: str, clean: None) -> None:
    out = run("tenant_eta.py", valkey_url).splitlines()
    # No worker ran yet: acme's wait is its rate's alone, exactly; zen's lane is paused.
    assert out == [
        "acme's last job: 9 ahead, ~1.8 s (rate)",
        "a new job for acme: 10 ahead, ~2.0 s (rate)",
        "a new job for zen: 1 ahead, no estimate (paused)",
    ]


async def test_results_example_reads_a_result_and_a_failure(valkey_url: str, clean: None) -> None:
    out = run("results.py", valkey_url)
    assert "2 + 3 = 5" in out
    assert "1 / 0 failed: ZeroDivisionError: division by zero" in out
    assert "ZeroDivisionError: division by zero" in out.splitlines()[2]
    assert "status: completed attempts 1" in out


async def test_progress_example_reports_to_a_subscriber_and_the_handle(
    valkey_url: str, clean: None
) -> None:
    out = run("progress.py", valkey_url).splitlines()
    assert out == [
        "result: 3",
        "progress: {'done': 3, 'of': 3}",
        "logs: ['imported 3 rows']",
        "events: ['progress', 'progress', 'progress', 'log']",
    ]


async def test_batch_tasks_example_inserts_in_batches_and_buries_the_bad_member(
    valkey_url: str, clean: None
) -> None:
    out = run("batch_tasks.py", valkey_url).splitlines()
    assert out == [
        "batches: [50, 50, 20]",
        "rows: 119",
        "first signup: row 1",
        "signup 7: bad email 'nobody'",
    ]


async def test_periodic_example_runs_each_tick_once_under_two_schedulers(
    valkey_url: str, clean: None
) -> None:
    out = run("periodic.py", valkey_url).splitlines()
    assert out == ["runs: 3 | distinct: 3", "each a tick's derived id: True"]


async def test_abort_example_cancels_a_scheduled_and_a_running_job(
    valkey_url: str, clean: None
) -> None:
    out = run("abort.py", valkey_url).splitlines()
    assert out == [
        "scheduled job: cancelled",
        "running job: requested",
        "result: cancelled, operator said stop",
        "state: cancelled attempts 1 rows written 1",  # the shielded row finished, no other
    ]
    guide = (EXAMPLES.parent / "docs" / "guides" / "abort.md").read_text()
    assert '--8<-- "examples/abort.py"' in guide  # the page shows this very file


async def test_flows_example_runs_a_chain_and_a_group_with_a_callback(
    valkey_url: str, clean: None
) -> None:
    out = run("flows.py", valkey_url).splitlines()
    # "<page of example.com>" is 21 characters; 5*100 + 6*100 + len("local").
    assert out == ["flow ids: 3 and 4", "chain: 21 chars", "group: 1105"]


async def test_ordered_lanes_example_sends_each_chat_in_order(valkey_url: str, clean: None) -> None:
    """Deferred Bs and retried Cs keep their place: each chat reads exactly what was sent."""
    assert run("ordered_lanes.py", valkey_url).splitlines() == [
        "g-1: A B C D A B C D",
        "g-2: A B C D A B C D",
    ]
    guide = (EXAMPLES.parent / "docs" / "guides" / "ordered-lanes.md").read_text()
    assert '--8<-- "examples/ordered_lanes.py"' in guide  # the page shows this very file


async def test_dashboard_mounts_in_an_asgi_app(
    valkey_url: str, monkeypatch: pytest.MonkeyPatch, clean: None
) -> None:
    monkeypatch.setenv("ECHOMQ_URL", valkey_url)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("dashboard_asgi", None)
    module = importlib.import_module("dashboard_asgi")
    async with serve_app(module.site) as base, httpx.AsyncClient(base_url=base) as http:
        home = await http.get("/")
        snapshot = await http.get("/queues/api/snapshot")
        refused = await http.post(
            "/queues/api/queues/email/lanes/acme/pause", headers={"X-Dashboard-Token": "wrong"}
        )
    assert home.text.startswith("my app")
    assert [q["name"] for q in snapshot.json()["queues"]] == ["email"]
    assert refused.status_code == 403


def test_quickstart_runs_with_a_real_worker_process(valkey_url: str) -> None:
    # The worker and the script import the echomq under test (not whatever else is installed).
    env = {**os.environ, "ECHOMQ_URL": valkey_url, "PYTHONPATH": str(SOURCE)}
    worker = subprocess.Popen(  # as getting-started says: from the example's own folder
        [sys.executable, "-m", "echomq", "worker", "quickstart:app"],
        cwd=EXAMPLES,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = subprocess.run(
            [sys.executable, "quickstart.py"],
            cwd=EXAMPLES,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        _, log = worker.communicate(timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "enqueued hello, ada\n"
    assert worker.returncode == 0, log
    asyncio.run(forget(valkey_url, "quickstart"))


async def test_fair_worker_serves_the_ring_by_weight_with_results(
    valkey_url: str, clean: None
) -> None:
    out = run("fair_worker.py", valkey_url).splitlines()
    # noisy flooded first, yet gold (weight 3) and free are served at once, by the ring.
    assert out[0] == "served: noisy gold gold gold free noisy gold gold gold free noisy noisy"
    assert out[1] == "gold's results: ['gold/page-0.pdf', 'gold/page-1.pdf', 'gold/page-2.pdf']"
    assert out[2] == "last served: noisy"


async def test_consumer_completes_retries_and_drops(valkey_url: str, clean: None) -> None:
    out = run("consumer.py", valkey_url).splitlines()
    assert out == [
        "sent ['a@acme.test', 'b@acme.test']",
        "completed 2 retried 1 dead 1",
        "dead letter: [('zen', 'dropped: address bounced')]",
    ]


async def test_token_buckets_defer_past_the_burst(valkey_url: str, clean: None) -> None:
    out = run("token_buckets.py", valkey_url).splitlines()
    assert out == [
        "chat 7, four takes at once: ['Taken', 'Taken', 'Taken', 'Wait']",
        "chat 8: 5 sent, the last two after waiting for their tokens",
    ]


async def test_scheduling_delays_refuses_milliseconds_and_plans_ticks(
    valkey_url: str, clean: None
) -> None:
    out = run("scheduling.py", valkey_url).splitlines()
    assert out[:3] == [
        "scheduled scheduled",
        "refused: at - looks like milliseconds: it takes Unix seconds (time.time())",
        "reminded: in half a second | tomorrow's is scheduled",
    ]
    assert out[3].startswith("next report at ")
    assert out[3].endswith(":00 UTC")
    assert out[4].split()[2] in {"Mon", "Tue", "Wed", "Thu", "Fri"}  # 9:00 in Paris, weekdays


async def test_retries_end_dead_and_reprocess_brings_back(valkey_url: str, clean: None) -> None:
    out = run("retries.py", valkey_url).splitlines()
    assert out == [
        "fetched https://api.example.test/rates at attempt 3",
        "dead: ValueError: order 17: card declined | traceback ends: "
        "ValueError: order 17: card declined",
        "dead letters: ['ValueError: order 17: card declined']",
        "order 17 charged",
    ]


async def test_hooks_run_around_the_worker_and_each_attempt(valkey_url: str, clean: None) -> None:
    out = run("hooks.py", valkey_url).splitlines()
    assert out == [
        "Acme Corp",
        "startup | before company attempt 1 | after company: 'Acme Corp' | shutdown",
    ]


async def test_two_workers_in_one_process_each_give_their_tasks_their_own_state(
    valkey_url: str, clean: None
) -> None:
    out = run("workers_in_one_process.py", valkey_url).splitlines()
    assert out == [
        "the SMS gateway texted +44 20 7946 0000",
        "the mail relay mailed ada@example.com",
        "the pool still answers: True",
    ]


async def test_sync_queue_admits_dedups_schedules_and_configures(
    valkey_url: str, clean: None
) -> None:
    out = run("sync_queue.py", valkey_url).splitlines()
    assert out == ["enqueued duplicate scheduled scheduled 500", "pending scheduled", "None"]
    queue = await Queue.connect(valkey_url, "sync-demo")
    try:
        acme = await queue.lane("acme").info()
    finally:
        await queue.close()
    assert (acme.limit, acme.rate, acme.depth) == (2, (5, 1.0), 1)


async def test_django_tasks_run_on_echomq_and_their_results_read_back(valkey_url: str) -> None:
    """examples/shop through Django's test client: views enqueue (``aenqueue`` from an async
    view too), a real ``echomq worker echomq.contrib.django:app`` runs the tasks, the views read
    the results through Django's task API; the lanes come from the ``tenant`` keyword."""
    queue = f"shop-{os.urandom(4).hex()}"
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(EXAMPLES / "django_backend.py")],
        env={
            **os.environ,
            "ECHOMQ_URL": valkey_url,
            "SHOP_QUEUE": queue,
            "PYTHONPATH": str(SOURCE),
        },
        capture_output=True,
        text=True,
        timeout=90,
    )
    try:
        assert done.returncode == 0, done.stderr
        out = done.stdout.splitlines()
        assert out[:2] == [
            "POST 202 READY",
            "before the worker: {'status': 'READY', 'attempts': 0}",
        ]
        assert out[2:5] == [
            "total: {'status': 'SUCCESSFUL', 'attempts': 1, "
            "'value': {'tenant': 'acme', 'total': 7}}",
            "receipt: {'status': 'SUCCESSFUL', 'attempts': 1, "
            "'value': 'receipt 7 sent to ceo@acme.test'}",
            "refund: {'status': 'FAILED', 'attempts': 1, 'error': 'builtins.LookupError'}",
        ]
        checkout, receipt, refund = out[5].removeprefix("ids: ").split()
        lanes = {}
        for result_id in (checkout, receipt, refund):
            name, _, job = result_id.rpartition(":")
            q = await Queue.connect(valkey_url, name)
            try:
                info = await q.job(job)
            finally:
                await q.close()
            assert info is not None
            lanes[name, info.lane] = info.state
        assert lanes == {
            (queue, "acme"): "completed",
            (f"{queue}-emails", "acme"): "completed",
            (queue, "zen"): "dead",
        }
    finally:
        await forget(valkey_url, queue, f"{queue}-emails")


async def test_json_logs_carry_the_jobs_fields_on_the_tasks_own_lines(valkey_url: str) -> None:
    try:
        lines = [json.loads(line) for line in run("json_logs.py", valkey_url).splitlines()]
    finally:
        await forget(valkey_url, "json-logs-example")
    enqueued, charging = lines
    assert (enqueued["logger"], enqueued["message"]) == ("billing", "enqueued")
    assert "job_id" not in enqueued
    assert charging["message"] == "charging acme: 1200 cents"
    assert (charging["queue"], charging["lane"], charging["attempt"]) == (
        "json-logs-example",
        "acme",
        1,
    )
    assert charging["trace_id"] is None
    assert len(charging["job_id"]) == 14


async def test_traces_join_the_request_the_enqueue_and_the_run(valkey_url: str) -> None:
    try:
        lines = run("traces.py", valkey_url).splitlines()
    finally:
        await forget(valkey_url, "traces-example")
    assert lines == [
        "POST /orders (internal), parent: None",
        "send traces-example (producer), parent: POST /orders",
        "process traces-example (consumer), parent: send traces-example, outcome: completed",
        "one trace: True",
    ]

"""OpenTelemetry traces, with the SDK and an in-memory exporter: an enqueue's producer span and
the worker's consumer spans are parent and child across two processes, each attempt of a
retried job a child of the same producer span; the messaging attributes; a batch's one span
links its members, a flow parent's its children; with no tracer provider nothing is recorded
and no payload carries a context."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from echomq import (
    App,
    AppWorker,
    Batching,
    Consumer,
    ConsumerOptions,
    Cool,
    Defer,
    Drop,
    Job,
    Member,
    Queue,
    group,
    tracing,
)

HERE = Path(__file__).resolve().parent


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """A tracer provider set for this test alone (the global one is set once per process in an
    application; here it is put in place and taken back)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    yield exporter
    provider.shutdown()


@pytest.fixture
def untraced(monkeypatch: pytest.MonkeyPatch) -> None:
    """No tracer provider set (as in an application that configured none)."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)


def hexed(span: ReadableSpan) -> dict[str, Any]:
    own = span.get_span_context()
    assert own is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": format(own.trace_id, "032x"),
        "span_id": format(own.span_id, "016x"),
        "parent_id": None if span.parent is None else format(span.parent.span_id, "016x"),
        "attributes": dict(span.attributes or {}),
        "links": [format(link.context.span_id, "016x") for link in span.links],
    }


def recorded(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    return [hexed(span) for span in exporter.get_finished_spans()]


def test_the_workers_spans_are_children_of_the_enqueues_across_processes(
    valkey_url: str, queue_name: str, spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    producer = App(valkey_url, queue=queue_name)

    @producer.task(name="charge", lane="tenant")
    async def charge(tenant: str, cents: int) -> int:
        raise NotImplementedError  # runs on the worker

    job = charge.enqueue_sync("acme", 1200).id
    [sent] = recorded(spans)
    assert sent["name"] == f"send {queue_name}"
    assert sent["kind"] == "PRODUCER"
    assert sent["parent_id"] is None
    assert sent["attributes"] == {
        "messaging.system": "echomq",
        "messaging.destination.name": queue_name,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "echomq.lane": "acme",
        "messaging.message.id": job,
        "echomq.verdict": "enqueued",
    }

    exported = tmp_path / "spans.jsonl"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    env.update(TRACE_SPANS=str(exported), TRACE_QUEUE=queue_name)
    command = [sys.executable, "-m", "echomq", "--url", valkey_url, "worker", "trace_app:app"]
    command += ["--burst", "--backoff-base", "0.01", "--backoff-cap", "0.01", "--beat", "0.2"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr

    attempts = [json.loads(line) for line in exported.read_text().splitlines()]
    attempts = [span for span in attempts if span["name"] == f"process {queue_name}"]
    assert len(attempts) == 2  # the failed first attempt and the retry that completed
    for number, (span, outcome) in enumerate(zip(attempts, ("retry", "completed"), strict=True), 1):
        assert span["kind"] == "CONSUMER"
        assert span["trace_id"] == sent["trace_id"]  # one trace: the request's, and the runs
        assert span["parent_id"] == sent["span_id"]  # each attempt a child of the enqueue
        assert span["attributes"] == {
            "messaging.system": "echomq",
            "messaging.destination.name": queue_name,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "echomq.lane": "acme",
            "messaging.message.id": job,
            "echomq.attempt": number,
            "echomq.task": "charge",
            "echomq.outcome": outcome,
        }
        named = {name for name in span["attributes"] if name.startswith("echomq.")}
        assert named <= set(tracing.ATTRIBUTES)  # the names the docs may show


async def test_a_batch_span_links_each_member_and_a_flow_parent_links_its_children(
    valkey_url: str, queue_name: str, spans: InMemorySpanExporter
) -> None:
    app = App(valkey_url, queue=queue_name)

    @app.task(batch=Batching(max_size=3, max_wait=5.0), queue=f"{queue_name}-batch")
    async def index(members: list[Member[int]]) -> None:
        return None

    @app.task
    async def square(n: int) -> int:
        return n * n

    @app.task
    async def total(squares: list[int]) -> int:
        return sum(squares)

    try:
        for n in range(3):
            await index.enqueue(n)
        handle = await group([square.call(2), square.call(3)], then=total).enqueue()
        await AppWorker(app).run_until_idle()
        assert await handle.result(timeout=5) == 13
    finally:
        await app.close()
    found = recorded(spans)
    members = [s for s in found if s["name"] == f"send {queue_name}-batch"]
    [batch] = [s for s in found if s["name"] == f"process {queue_name}-batch"]
    assert batch["kind"] == "CONSUMER"
    assert batch["attributes"]["messaging.batch.message_count"] == 3
    assert sorted(batch["links"]) == sorted(s["span_id"] for s in members)

    [flow] = [s for s in found if s["name"] == f"send {queue_name}" and s["parent_id"] is None]
    assert flow["attributes"]["messaging.batch.message_count"] == 3
    nodes = {
        s["attributes"]["messaging.message.id"]: s for s in found if s["name"].startswith("create")
    }
    assert len(nodes) == 3
    assert all(s["parent_id"] == flow["span_id"] for s in nodes.values())
    runs = {
        s["attributes"]["messaging.message.id"]: s
        for s in found
        if s["name"] == f"process {queue_name}"
    }
    assert set(runs) == set(nodes)
    for job, run in runs.items():
        assert run["parent_id"] == nodes[job]["span_id"]  # each node's run, child of its own
        assert run["trace_id"] == flow["trace_id"]
    parent = runs[handle.id]
    children = [job for job in nodes if job != handle.id]
    assert sorted(parent["links"]) == sorted(nodes[job]["span_id"] for job in children)
    assert all(not runs[job]["links"] for job in children)


async def test_without_a_tracer_provider_nothing_is_recorded_and_nothing_carried(
    valkey_url: str, queue_name: str, untraced: None
) -> None:
    exporter = InMemorySpanExporter()  # on a provider the application did not set
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = App(valkey_url, queue=queue_name)

    @app.task
    async def echo(n: int) -> int:
        return n

    async def handler(job: Any) -> None:
        return None

    try:
        handle = await echo.enqueue(1)
        queue = app.queue(queue_name)
        info = await queue.job(handle.id)
        assert info is not None
        assert set(info.payload) == {"task", "args"}  # no traceparent
        consumer = Consumer(queue, handler)
        assert consumer.handler is handler  # the consumer runs exactly the untraced code
        await AppWorker(app).run_until_idle()
        assert await handle.result(timeout=5) == 1
    finally:
        await app.close()
    assert exporter.get_finished_spans() == ()


async def test_a_raw_job_gets_a_producer_span_and_a_consumer_span_of_its_own(
    queue: Queue, spans: InMemorySpanExporter
) -> None:
    payload = {"order": 7}
    verdict = await queue.enqueue(payload, lane="acme")
    assert payload == {"order": 7}  # a user's payload is never written into
    await queue.enqueue_many([{"order": 8}, {"order": 9}])
    seen: list[int] = []
    done = asyncio.Event()

    async def handler(job: Any) -> None:
        seen.append(trace.get_current_span().get_span_context().span_id)  # the attempt's span
        if len(seen) == 3:
            done.set()

    consumer = Consumer(queue, handler, ConsumerOptions(beat=0.1))
    running = asyncio.ensure_future(consumer.run())
    await asyncio.wait_for(done.wait(), 10)
    consumer.stop()
    await running
    found = recorded(spans)
    one, many = (s for s in found if s["kind"] == "PRODUCER")
    assert one["attributes"]["messaging.message.id"] == verdict.id
    assert many["attributes"]["messaging.batch.message_count"] == 2
    assert many["attributes"]["echomq.admitted"] == 2
    runs = [s for s in found if s["kind"] == "CONSUMER"]
    assert sorted(int(s["span_id"], 16) for s in runs) == sorted(seen)
    # No context in the job: each attempt's span is a root, in a trace of its own.
    assert all(s["parent_id"] is None for s in runs)
    assert {s["attributes"]["echomq.outcome"] for s in runs} == {"completed"}


async def test_each_attempts_span_ends_with_what_the_engine_did(
    queue: Queue, spans: InMemorySpanExporter
) -> None:
    """Dead (a Drop), deferred then completed (a Defer), cooled then completed (a Cool)."""
    for verb in ("drop", "defer", "cool"):
        await queue.enqueue({"do": verb}, lane=verb)
    settles: list[str] = []
    tried: set[str] = set()
    done = asyncio.Event()

    class Count:
        def claimed(self, queue: str, jobs: Any, lease_ms: int) -> None:
            pass

        def settled(self, queue: str, job: Job, outcome: str) -> None:
            settles.append(outcome)
            if len(settles) == 5:
                done.set()

    async def handler(job: Job) -> None:
        verb = job.payload["do"]
        if verb == "drop":
            raise Drop("no such customer")
        if verb not in tried:
            tried.add(verb)
            raise Defer(0.01) if verb == "defer" else Cool(0.01)

    consumer = Consumer(queue, handler, ConsumerOptions(beat=0.05), observer=Count())
    running = asyncio.ensure_future(consumer.run())
    await asyncio.wait_for(done.wait(), 10)
    consumer.stop()
    await running
    ended = sorted(
        (s.attributes["echomq.lane"], s.attributes["echomq.outcome"], s.status.status_code.name)
        for s in spans.get_finished_spans()
        if s.kind.name == "CONSUMER"
    )
    assert ended == [
        ("cool", "completed", "UNSET"),
        ("cool", "cooled", "UNSET"),
        ("defer", "completed", "UNSET"),
        ("defer", "deferred", "UNSET"),
        ("drop", "dead", "ERROR"),
    ]


async def test_a_batch_of_calls_is_one_send_whose_context_every_payload_carries(
    valkey_url: str, queue_name: str, spans: InMemorySpanExporter
) -> None:
    app = App(valkey_url, queue=queue_name)

    @app.task(lane="tenant")
    async def echo(tenant: str) -> str:
        return tenant

    try:
        handles = await app.enqueue_many([echo.call("acme"), echo.call("zen")])
        [sent] = recorded(spans)
        assert sent["attributes"]["messaging.batch.message_count"] == 2
        assert "echomq.lane" not in sent["attributes"]  # two lanes: none to name
        queue = app.queue(queue_name)
        for handle in handles:
            info = await queue.job(handle.id)
            assert info is not None
            assert info.payload["traceparent"].split("-")[1:3] == [
                sent["trace_id"],
                sent["span_id"],
            ]
    finally:
        await app.close()

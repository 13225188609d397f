"""echomq.tracing without a server: without ``opentelemetry`` installed (simulated: its modules
hidden from the import system) there is no tracer and no span, and echomq's calls go on as
before; a log line's trace id is read from the carried ``traceparent`` alone."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator

import pytest

from echomq import tracing
from echomq.consumers.log_fields import job_fields
from echomq.engine.results import Job

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def without_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``import opentelemetry`` fails, as where the extra is not installed."""
    for name in [name for name in sys.modules if name.split(".")[0] == "opentelemetry"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # None: the import raises
    tracing.api.cache_clear()
    yield
    tracing.api.cache_clear()


def test_without_the_extra_there_is_no_tracer_and_nothing_to_import(
    without_opentelemetry: None,
) -> None:
    with pytest.raises(ImportError):
        import opentelemetry  # noqa: F401
    assert tracing.api() is None
    assert tracing.find_tracer() is None
    assert tracing.Spans().tracer() is None
    assert tracing.current_trace_id() is None
    job = Job("JOB0Sc7HwMh4E4", {"task": "t", "args": {}}, 1, "_", 0, "q")
    assert job_fields(job)["trace_id"] is None


def test_the_import_is_made_once() -> None:
    tracing.api.cache_clear()
    first = tracing.api()
    assert first is not None
    assert tracing.api() is first


def test_a_log_lines_trace_id_is_the_carried_traceparents() -> None:
    assert tracing.trace_id({"task": "t", "traceparent": PARENT}) == PARENT.split("-")[1]
    assert tracing.trace_id({"traceparent": "00-" + "0" * 32 + "-b7ad6b7169203331-01"}) is None
    assert tracing.trace_id({"traceparent": "garbage"}) is None
    assert tracing.trace_id({"traceparent": 7}) is None
    assert tracing.trace_id(["traceparent", PARENT]) is None
    job = Job("JOB0Sc7HwMh4E4", {"task": "t", "args": {}, "traceparent": PARENT}, 2, "_", 0, "q")
    assert job_fields(job)["trace_id"] == PARENT.split("-")[1]


def test_a_provider_looked_for_at_most_once_a_second_while_none_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looks: list[int] = []
    monkeypatch.setattr(tracing, "find_tracer", lambda: looks.append(1))
    imported = importlib.import_module("opentelemetry.trace")
    monkeypatch.delitem(sys.modules, "opentelemetry.trace")
    spans = tracing.Spans()
    assert spans.tracer() is None
    assert looks == []  # OpenTelemetry not imported: no provider can be set, nothing to look for
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", imported)
    assert [spans.tracer() for _ in range(100)] == [None] * 100
    assert len(looks) == 1

"""An App the trace test runs in a worker process (``echomq worker trace_app:app``), as an
application would: it sets its tracer provider at import, with an exporter that appends each
finished span to the JSON-lines file ``TRACE_SPANS`` names. Its task fails its first attempt."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from echomq import App, context


class JsonLines(SpanExporter):
    """Each span as one JSON object: what the test asserts on."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                out.write(json.dumps(as_dict(span)) + "\n")
        return SpanExportResult.SUCCESS


def as_dict(span: ReadableSpan) -> dict[str, object]:
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


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(JsonLines(os.environ["TRACE_SPANS"])))
trace.set_tracer_provider(provider)

app = App(queue=os.environ["TRACE_QUEUE"])


@app.task(lane="tenant", retries=1)
async def charge(tenant: str, cents: int) -> int:
    if context().attempt == 1:
        raise ConnectionError("the card network timed out")
    return cents

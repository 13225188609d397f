"""OpenTelemetry traces of an enqueue and its run: the application sets a tracer provider (echomq
needs no call of its own), a web request's span enqueues a task, and the worker's span of the
run is a child of the enqueue's, in the request's trace. Prints each span and its parent.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/traces.py
"""

from __future__ import annotations

import asyncio
import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from echomq import App, AppWorker

# --8<-- [start:provider]
# The application's tracing, set up once at start. Here the spans stay in memory to be printed;
# in production an OTLP exporter sends them to Jaeger, Tempo or Honeycomb:
# provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
exporter = InMemorySpanExporter()
provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
# --8<-- [end:provider]

app = App(os.environ.get("ECHOMQ_URL"), queue="traces-example")
web = trace.get_tracer("shop.web")


@app.task(lane="tenant")
async def charge(tenant: str, cents: int) -> int:
    return cents


async def main() -> None:
    async with app:
        with web.start_as_current_span("POST /orders"):
            await charge.enqueue("acme", 1200)
        await AppWorker(app).run_until_idle()
    spans = sorted(exporter.get_finished_spans(), key=lambda span: span.start_time or 0)
    names = {span.context.span_id: span.name for span in spans if span.context is not None}
    for span in spans:
        parent = names.get(span.parent.span_id) if span.parent is not None else None
        outcome = (span.attributes or {}).get("echomq.outcome")
        line = f"{span.name} ({span.kind.name.lower()}), parent: {parent}"
        print(line + (f", outcome: {outcome}" if outcome else ""))
    print(f"one trace: {len({span.context.trace_id for span in spans if span.context}) == 1}")


if __name__ == "__main__":
    asyncio.run(main())

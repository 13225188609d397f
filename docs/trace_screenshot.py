"""Redraw docs/img/trace.png: one real trace of echomq, as a waterfall.

    .venv/bin/python docs/trace_screenshot.py   # docs/img/trace.png

A web request's span enqueues a task (its first attempt fails, the retry completes) and a flow
(two thumbnails, then a publish that receives both); an in-process worker on an embedded
Valkey runs them. The spans are recorded by OpenTelemetry's SDK with an in-memory exporter,
drawn as an HTML waterfall and shot by Debian's chromium (``make browser-deps``) through
Playwright, as docs/screenshots.py does. No Jaeger needed: the page shows what Jaeger would.
"""

from __future__ import annotations

import asyncio
import html
import logging
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from playwright.async_api import async_playwright

from echomq import App, AppWorker, ConsumerOptions, Fixed, context, group
from echomq.server import EmbeddedValkey

IMG = Path(__file__).parent / "img"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
COLOURS = {"SERVER": "#6b7280", "PRODUCER": "#2563eb", "CONSUMER": "#16a34a", "INTERNAL": "#9333ea"}
SHOWN = (
    "echomq.task",
    "echomq.lane",
    "echomq.attempt",
    "echomq.outcome",
    "messaging.batch.message_count",
)


async def record(url: str) -> list[ReadableSpan]:
    """A real run: the request, its enqueues, and a worker that runs them."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    web = trace.get_tracer("shop.web")
    app = App(url, queue="orders")

    @app.task(name="charge", lane="tenant", retries=2, backoff=Fixed(0.03))
    async def charge(tenant: str, cents: int) -> str:
        with web.start_as_current_span("card network: authorize"):
            await asyncio.sleep(0.004)
            if tenant == "acme" and context().attempt == 1:
                raise ConnectionError("the card network timed out")
        return "ch_1"

    @app.task(name="thumbnail", queue="media")
    async def thumbnail(image: str) -> str:
        await asyncio.sleep(0.006)
        return f"{image}.thumb"

    @app.task(name="publish", queue="media")
    async def publish(thumbnails: list[str]) -> int:
        await asyncio.sleep(0.002)
        return len(thumbnails)

    async with app:
        # Warm: each queue opened and its id node leased before the request, as in a server
        # that has been up a while (the worker runs these too, in traces of their own).
        await thumbnail.enqueue("warm.png")
        await charge.using(lane="warm").enqueue("warm", 0)
        with web.start_as_current_span("POST /orders", kind=trace.SpanKind.SERVER):
            await charge.enqueue("acme", 1200)
            calls = [thumbnail.call("a.png"), thumbnail.call("b.png")]
            await group(calls, then=publish).enqueue()
        await AppWorker(app, options=ConsumerOptions(concurrency=1)).run_until_idle()
    request = next(s for s in exporter.get_finished_spans() if s.name == "POST /orders")
    assert request.context is not None
    spans = [
        s for s in exporter.get_finished_spans() if s.context.trace_id == request.context.trace_id
    ]  # type: ignore[union-attr]
    return sorted(spans, key=lambda s: s.start_time or 0)


def page(spans: list[ReadableSpan]) -> str:
    """The waterfall: a row per span, indented under its parent, its bar placed in time."""
    children: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in ids else None, []).append(span)
    start = min(s.start_time or 0 for s in spans)
    end = max(s.end_time or 0 for s in spans)
    total = max(end - start, 1)
    rows: list[str] = []

    def visit(span: ReadableSpan, depth: int) -> None:
        left = 100 * ((span.start_time or 0) - start) / total
        width = max(100 * ((span.end_time or 0) - (span.start_time or 0)) / total, 0.3)
        ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        attributes = span.attributes or {}
        tags = " ".join(
            f"<span class=tag>{name.split('.')[-1]}={html.escape(str(attributes[name]))}</span>"
            for name in SHOWN
            if name in attributes and attributes[name] != "_"
        )
        if span.links:
            tags += f" <span class='tag link'>links: {len(span.links)}</span>"
        failed = span.status.status_code.name == "ERROR"
        colour = "#dc2626" if failed else COLOURS.get(span.kind.name, "#9333ea")
        rows.append(
            f"<div class=row><div class=label style='padding-left:{14 * depth + 6}px'>"
            f"<b>{html.escape(span.name)}</b> <i>{span.kind.name.lower()}</i> {tags}</div>"
            f"<div class=lane><div class=bar style='left:{left:.2f}%;width:{width:.2f}%;"
            f"background:{colour}'></div><span class=ms style='left:{min(left + width, 88):.2f}%'>"
            f"{ms:.1f} ms</span></div></div>"
        )
        for child in children.get(span.context.span_id if span.context else 0, []):
            visit(child, depth + 1)

    for root in children.get(None, []):
        visit(root, 0)
    trace_id = format(spans[0].context.trace_id, "032x") if spans[0].context else ""
    return f"""<!doctype html><meta charset=utf-8><style>
body {{ font: 13px system-ui, sans-serif; margin: 16px; color: #111827; background: #fff; }}
h1 {{ font-size: 15px; margin: 0 0 10px; }} h1 code {{ color: #6b7280; font-weight: normal; }}
.row {{ display: flex; border-bottom: 1px solid #f3f4f6; height: 26px; align-items: center; }}
.label {{ width: 640px; flex: none; white-space: nowrap; overflow: hidden; }}
.label {{ box-sizing: border-box; }}
.label i {{ color: #6b7280; font-style: normal; font-size: 11px; }}
.tag {{ background: #f3f4f6; border-radius: 3px; padding: 1px 4px; font-size: 11px; }}
.tag.link {{ background: #fef3c7; }}
.lane {{ position: relative; flex: 1; height: 14px; }}
.bar {{ position: absolute; height: 14px; border-radius: 2px; }}
.ms {{ position: absolute; margin-left: 6px; font-size: 11px; color: #4b5563; }}
</style><h1>trace <code>{trace_id}</code>: a request enqueues, a worker runs</h1>
{"".join(rows)}"""


async def main() -> None:
    logging.getLogger("echomq").setLevel(logging.CRITICAL)  # the failed attempt's traceback
    with EmbeddedValkey() as server:
        spans = await record(server.url)
    target = IMG / "trace.png"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        view = await browser.new_page(viewport={"width": 1400, "height": 200})
        await view.set_content(page(spans))
        await view.screenshot(path=str(target), full_page=True)
        await browser.close()
    print(f"{target}: {len(spans)} spans")


if __name__ == "__main__":
    asyncio.run(main())

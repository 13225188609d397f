"""OpenTelemetry traces: a producer span per admission (one per batch, one per flow), the W3C
trace context carried in the task layer's payloads, a consumer span per attempt, links for
batches and flows. On when ``opentelemetry-api`` is installed (the ``otel`` extra) and the
application set a tracer provider; nothing else to call (docs/guides/observability.md).

The module imports ``opentelemetry`` once, at the first look for a tracer, and works without it.
It imports nothing of echomq's wings: the engine, the consumers and the task layer all call it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Link, Span, Tracer

    from echomq.engine.flows import Flow, FlowIds
    from echomq.engine.results import Job, Verdict

#: ``messaging.system``: what the spans say the messaging system is.
SYSTEM = "echomq"
#: The payload keys of the W3C trace context (task payloads only), and a flow parent's links.
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
TRACELINKS = "tracelinks"
#: The span attributes of echomq's own (the ``messaging.*`` ones are OpenTelemetry's semantic
#: conventions for messaging).
ATTRIBUTES = (
    "echomq.lane",
    "echomq.task",
    "echomq.attempt",
    "echomq.outcome",
    "echomq.verdict",
    "echomq.admitted",
    "echomq.refused",
    "echomq.link",
)
#: The module an application sets its tracer provider with.
_OTEL_TRACE = "opentelemetry.trace"
#: Seconds between two looks for a tracer provider while none is set (each look costs a
#: microsecond; between them, an admission pays one clock read).
LOOK_EVERY = 1.0


class _Api(NamedTuple):
    """The pieces of ``opentelemetry`` echomq uses, imported once."""

    trace: Any
    context: Any
    propagator: Any  # W3C traceparent/tracestate, whatever the app's global propagators are
    unset: tuple[type, ...]  # providers that mean "the application set none"
    producer: Any
    consumer: Any
    error: Any


@functools.cache
def api() -> _Api | None:
    """``opentelemetry``'s API, or None when it is not installed (imported at the first call
    only: an application without the extra never pays for it)."""
    try:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return None
    return _Api(
        trace,
        context,
        TraceContextTextMapPropagator(),
        (trace.ProxyTracerProvider, trace.NoOpTracerProvider),
        trace.SpanKind.PRODUCER,
        trace.SpanKind.CONSUMER,
        trace.StatusCode.ERROR,
    )


def find_tracer() -> Tracer | None:
    """echomq's tracer from the application's tracer provider; None without the extra or
    while the application has set none."""
    otel = api()
    if otel is None:
        return None
    provider = otel.trace.get_tracer_provider()
    if isinstance(provider, otel.unset):
        return None
    tracer: Tracer = provider.get_tracer("echomq", _version())
    return tracer


def _version() -> str | None:
    """echomq's installed version, for the tracer's scope (None from a bare checkout)."""
    try:
        return importlib.metadata.version("echomq")
    except importlib.metadata.PackageNotFoundError:
        return None


class Spans:
    """Where one queue's (or consumer's) spans go: :func:`find_tracer`'s tracer, looked for
    once OpenTelemetry is imported, at most once a :data:`LOOK_EVERY` while the application
    has set no provider, then kept (a provider, once set, is the process's for good)."""

    __slots__ = ("_look_at", "_tracer")

    def __init__(self) -> None:
        self._tracer: Tracer | None = None
        self._look_at = 0.0

    def tracer(self) -> Tracer | None:
        """The tracer, or None: tracing is off (no extra, or no provider yet)."""
        tracer = self._tracer
        if tracer is not None:
            return tracer
        if _OTEL_TRACE not in sys.modules:
            # An application that set a provider imported OpenTelemetry to do it: until then
            # there is nothing to look for (and nothing is imported, at a dict lookup's cost).
            return None
        now = time.monotonic()
        if now < self._look_at:
            return None
        self._look_at = now + LOOK_EVERY
        self._tracer = find_tracer()
        return self._tracer


# -- the producer side ---------------------------------------------------------------------------


def _attributes(queue: str, operation: str, lane: str | None = None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
    }
    if isinstance(lane, str):
        attributes["echomq.lane"] = lane
    return attributes


def headers(span: Span) -> dict[str, str]:
    """``span``'s W3C trace context as payload keys (``traceparent``, ``tracestate``)."""
    otel = api()
    assert otel is not None
    carrier: dict[str, str] = {}
    otel.propagator.inject(carrier, otel.trace.set_span_in_context(span))
    return carrier


class Sending:
    """One producer span: ``send <queue>`` (kind PRODUCER), around one admission or a batch.

    ``carriers`` are payloads of the caller's own making (the task layer's envelopes): the
    span's W3C context is written into each, so the consumer's span becomes its child. Never a
    user's payload: ``Queue.enqueue`` passes none. Written whenever the context is valid, a
    sampled-out one too, so the worker follows the producer's sampling decision.
    """

    __slots__ = ("span",)

    def __init__(
        self,
        tracer: Tracer,
        queue: str,
        lane: str | None,
        carriers: Sequence[Any] = (),
        count: int | None = None,
    ) -> None:
        otel = api()
        assert otel is not None
        attributes = _attributes(queue, "send", lane)
        if count is not None:
            attributes["messaging.batch.message_count"] = count
        self.span: Span = tracer.start_span(
            f"send {queue}", kind=otel.producer, attributes=attributes
        )
        if carriers and self.span.get_span_context().is_valid:
            carried = headers(self.span)
            for payload in carriers:
                if isinstance(payload, dict):
                    payload.update(carried)

    def __enter__(self) -> Sending:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        if exc is not None:
            failed(self.span, exc)
        self.span.end()

    def sent(self, verdict: Verdict) -> Verdict:
        """Note one admission's verdict (the job's id, ``enqueued``/``duplicate``…)."""
        self.span.set_attribute("messaging.message.id", verdict.id)
        self.span.set_attribute("echomq.verdict", verdict.kind)
        return verdict

    def sent_many(self, verdicts: list[Verdict]) -> list[Verdict]:
        """Note a batch's verdicts: how many were admitted (new), how many refused."""
        kinds = [verdict.kind for verdict in verdicts]
        admitted = sum(kind in ("enqueued", "scheduled") for kind in kinds)
        self.span.set_attribute("echomq.admitted", admitted)
        self.span.set_attribute("echomq.refused", sum(kind == "error" for kind in kinds))
        return verdicts


def sending_many(tracer: Tracer, queue: str, jobs: Sequence[Any], carries_context: bool) -> Sending:
    """The producer span of a batch (``(payload, options)`` pairs, ``Item`` s or payloads):
    one span, its ``messaging.batch.message_count`` the items, the lane when they share one;
    with ``carries_context`` each pair's payload takes the span's context."""
    lanes = {getattr(_options(job), "lane", None) for job in jobs}
    lane = next(iter(lanes)) if len(lanes) == 1 else None
    lane = lane if isinstance(lane, str) else None
    carriers = [job[0] for job in jobs if type(job) is tuple and job] if carries_context else ()
    return Sending(tracer, queue, lane, carriers, len(jobs))


def _options(job: Any) -> Any:
    """A batch item's options: a pair's second value, an ``Item`` itself (it has a lane)."""
    return job[1] if type(job) is tuple and len(job) == 2 else job


def failed(span: Span, exc: BaseException) -> None:
    """Mark ``span`` failed by ``exc`` (an exception event and the ERROR status)."""
    otel = api()
    assert otel is not None
    if isinstance(exc, Exception):
        span.record_exception(exc)
    span.set_status(otel.trace.Status(otel.error, f"{type(exc).__name__}: {exc}"[:200]))


class FlowSending:
    """A flow's producer spans: ``send <queue>`` for the flow (its node count), and with
    ``carries_context`` a ``create <queue>`` span per node, child of it, carried in the node's
    payload; a parent's payload also carries its children's (``tracelinks``), so its consumer
    span links them."""

    __slots__ = ("nodes", "sending")

    def __init__(self, tracer: Tracer, queue: str, flow: Flow, carries_context: bool) -> None:
        otel = api()
        assert otel is not None
        self.sending = Sending(tracer, queue, getattr(flow, "lane", None), (), _count(flow))
        self.nodes: list[Span] = []
        if carries_context:
            parent = otel.trace.set_span_in_context(self.sending.span)
            self._create(tracer, parent, flow, queue, 0)

    def _create(
        self, tracer: Tracer, parent: Context, node: Flow, home: str, depth: int
    ) -> dict[str, str]:
        otel = api()
        assert otel is not None
        # Read as plan() will check it: a node it refuses is refused there, not here.
        queue = getattr(node, "queue", None) or home
        span = tracer.start_span(
            f"create {queue}",
            context=parent,
            kind=otel.producer,
            attributes=_attributes(str(queue), "create", getattr(node, "lane", None)),
        )
        self.nodes.append(span)  # in the order of FlowIds.ids: parents before their children
        carried = headers(span)
        kids = _kids(node, depth)
        children = [self._create(tracer, parent, kid, queue, depth + 1) for kid in kids]
        payload = getattr(node, "payload", None)
        if type(payload) is dict:
            payload.update(carried)
            if children:
                payload[TRACELINKS] = [child[TRACEPARENT] for child in children if child]
        return carried

    def __enter__(self) -> FlowSending:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        for span in self.nodes:
            span.end()
        self.sending.__exit__(kind, exc, _)

    def sent(self, ids: FlowIds) -> FlowIds:
        """Note the flow's ids: the root's on the flow's span, each node's on its own."""
        self.sending.span.set_attribute("messaging.message.id", ids.id)
        self.sending.span.set_attribute("echomq.verdict", ids.kind)
        for span, job_id in zip(self.nodes, ids.ids, strict=False):
            span.set_attribute("messaging.message.id", job_id)
        return ids


def _kids(node: Any, depth: int) -> Sequence[Any]:
    """A flow node's children as :func:`~echomq.engine.flows.plan` will read them; none past
    the deepest a flow may nest (plan refuses such a flow, and a cycle, by name)."""
    kids = getattr(node, "children", ())
    return kids if isinstance(kids, list | tuple) and depth < _DEEPEST else ()


#: Deeper than any flow plan() accepts (32): the spans' walk stops there.
_DEEPEST = 40


def _count(flow: Flow, depth: int = 0) -> int:
    return 1 + sum(_count(child, depth + 1) for child in _kids(flow, depth))


# -- the consumer side ---------------------------------------------------------------------------


def _carried(payload: Any) -> dict[str, str] | None:
    """The W3C context a payload carries (a dict with a ``traceparent`` text), else None."""
    if type(payload) is not dict:
        return None
    parent = payload.get(TRACEPARENT)
    if not isinstance(parent, str):
        return None
    state = payload.get(TRACESTATE)
    return (
        {TRACEPARENT: parent, TRACESTATE: state}
        if isinstance(state, str)
        else {TRACEPARENT: parent}
    )


def parent_of(payload: Any) -> Context | None:
    """The producer's context a job's payload carries, else None (a raw job's: a root span)."""
    carrier = _carried(payload)
    if carrier is None:
        return None
    otel = api()
    assert otel is not None
    parent: Context = otel.propagator.extract(carrier)
    return parent


def _links(payload: Any) -> Iterator[Link]:
    """The links a flow parent's payload carries (its children's ``create`` spans)."""
    links = payload.get(TRACELINKS) if type(payload) is dict else None
    if not isinstance(links, list):
        return
    otel = api()
    assert otel is not None
    for traceparent in links:
        if isinstance(traceparent, str):
            context = otel.propagator.extract({TRACEPARENT: traceparent})
            found = otel.trace.get_current_span(context).get_span_context()
            if found.is_valid:
                yield otel.trace.Link(found, {"echomq.link": "child"})


def processing(tracer: Tracer, job: Job) -> Span:
    """One attempt's consumer span, ``process <queue>`` (kind CONSUMER): a child of the context
    the job carries (every attempt of a job, so a retried job's attempts share its trace),
    linking a flow parent's children."""
    otel = api()
    assert otel is not None
    payload = job.payload
    attributes = _attributes(job.queue, "process", job.lane)
    attributes["messaging.message.id"] = job.id
    attributes["echomq.attempt"] = job.attempts
    if type(payload) is dict and isinstance(payload.get("task"), str):
        attributes["echomq.task"] = payload["task"]
    span: Span = tracer.start_span(
        f"process {job.queue}",
        context=parent_of(payload),
        kind=otel.consumer,
        attributes=attributes,
        links=list(_links(payload)),
    )
    return span


def processing_batch(tracer: Tracer, queue: str, jobs: Sequence[Job]) -> Span:
    """A batch's one consumer span (a root), with a link per member to the context its job
    carries; its task's name when the members share one (a batch task's)."""
    otel = api()
    assert otel is not None
    attributes = _attributes(queue, "process")
    attributes["messaging.batch.message_count"] = len(jobs)
    tasks = {job.payload.get("task") if type(job.payload) is dict else None for job in jobs}
    task = tasks.pop() if len(tasks) == 1 else None
    if isinstance(task, str):
        attributes["echomq.task"] = task
    links = []
    for job in jobs:
        parent = parent_of(job.payload)
        if parent is None:
            continue
        found = otel.trace.get_current_span(parent).get_span_context()
        if found.is_valid:
            links.append(otel.trace.Link(found, {"messaging.message.id": job.id}))
    span: Span = tracer.start_span(
        f"process {queue}", kind=otel.consumer, attributes=attributes, links=links
    )
    return span


def attach(span: Span) -> object:
    """Make ``span`` the current one (a handler's own spans, an HTTP call's, nest in it); the
    token for :func:`detach`."""
    otel = api()
    assert otel is not None
    return otel.context.attach(otel.trace.set_span_in_context(span))


def detach(token: object) -> None:
    otel = api()
    assert otel is not None
    otel.context.detach(token)


# -- what a log line shows -----------------------------------------------------------------------


def trace_id(payload: Any) -> str | None:
    """The trace id (32 hex digits) a job's payload carries, else None; no OpenTelemetry
    needed: it is the ``traceparent``'s second field."""
    carrier = _carried(payload)
    if carrier is None:
        return None
    parts = carrier[TRACEPARENT].split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    return parts[1]


def current_trace_id() -> str | None:
    """The trace id of the current span (a raw job's consumer span), else None; None at once
    without the extra."""
    otel = api()
    if otel is None:
        return None
    found = otel.trace.get_current_span().get_span_context()
    return format(found.trace_id, "032x") if found.is_valid else None


def carriers_of(jobs: Iterable[Any]) -> list[Any]:
    """A batch as a list (a generator is read once, here, before the span writes into its
    payloads)."""
    return jobs if isinstance(jobs, list) else list(jobs)

"""A consumer's OpenTelemetry spans: a span per attempt (``process <queue>``, kind CONSUMER),
current while the handler runs and ended when the attempt settles, with its outcome; a batch
task's batch as one span linking its members. Installed by :func:`instrument` when the
consumer is made, only once the application set a tracer provider: off, the consumer runs
exactly the code it runs without tracing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from echomq.consumers import abort as _abort
from echomq.consumers.signals import Cool, Defer
from echomq.engine.results import Job
from echomq.tracing import attach, detach, failed, processing, processing_batch

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from echomq.consumers.ledger import Observer, Outcome
    from echomq.engine.queue import Queue

Handler = Callable[[Job], Awaitable[Any]]

#: The outcome an attempt's span ends with, by what the consumer told its observer.
OUTCOMES: dict[str, str] = {
    "completed": "completed",
    "retried": "retry",
    "dead": "dead",
    "deferred": "deferred",
    "cancelled": "cancelled",
    "lost": "lost",
}


def instrument(
    queue: Queue, handler: Handler, observer: Observer | None
) -> tuple[Handler, Observer | None]:
    """``handler`` and ``observer`` as a consumer of ``queue`` runs them: as given while
    tracing is off, else wrapped by :class:`Attempts`."""
    tracer = queue.spans.tracer()
    if tracer is None:
        return handler, observer
    attempts = Attempts(tracer, handler, observer)
    return attempts.run, attempts


class Attempts:
    """The spans of the attempts in hand: opened by :meth:`run` (the handler, wrapped), ended
    by :meth:`settled` (the observer's call, wrapped) with the settle's outcome."""

    def __init__(self, tracer: Tracer, handler: Handler, observer: Observer | None) -> None:

        self.tracer = tracer
        self.handler = handler
        self.inner = observer
        self.cool, self.defer = Cool, Defer
        #: The span of each job in hand, by the Job's identity (the consumer passes the same
        #: Job to the handler and to the observer), with the outcome its signal named.
        self.open: dict[int, tuple[Span, Job, str | None]] = {}

    async def run(self, job: Job) -> Any:
        span = processing(self.tracer, job)
        self.open[id(job)] = (span, job, None)
        token = attach(span)
        try:
            return await self.handler(job)
        except asyncio.CancelledError:
            if not _abort.is_heard():  # a stop's deadline: no settle follows, end it here
                self._end(job, "lost")  # the lease expires and the job is run again
            raise
        except Exception as exc:
            if isinstance(exc, self.cool):
                self.open[id(job)] = (span, job, "cooled")  # the observer hears "deferred"
            elif not isinstance(exc, self.defer):  # a deferral is no failure
                failed(span, exc)
            raise
        finally:
            detach(token)

    def claimed(self, queue: str, jobs: Sequence[Job], lease_ms: int) -> None:
        if self.inner is not None:
            self.inner.claimed(queue, jobs, lease_ms)

    def settled(self, queue: str, job: Job, outcome: Outcome) -> None:
        if self.inner is not None:
            self.inner.settled(queue, job, outcome)
        self._end(job, OUTCOMES.get(outcome, outcome))

    def _end(self, job: Job, outcome: str) -> None:
        found = self.open.pop(id(job), None)
        if found is None:
            return
        span, _, signalled = found
        if signalled is not None and outcome == "deferred":
            outcome = signalled
        span.set_attribute("echomq.outcome", outcome)
        span.end()


async def run_batch(queue: Queue, jobs: Sequence[Job], work: Awaitable[None]) -> None:
    """Run a batch's ``work`` (its handler and settles) inside one consumer span linking each
    member's producer context; untraced while tracing is off."""
    tracer = queue.spans.tracer()
    if tracer is None:
        await work
        return
    span = processing_batch(tracer, queue.name, jobs)
    token = attach(span)
    try:
        await work
    except BaseException as exc:
        failed(span, exc)
        raise
    finally:
        detach(token)
        span.end()

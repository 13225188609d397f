"""A claim loop's settles and their books. :class:`Ledger` hands each finished job's settle to
the loop's :class:`~echomq.engine.settler.Settler` (the settles of one tick go out together,
pipelined with the claim that fills the freed slots) and books each answer: the
:class:`Tally`, the :class:`Observer`, and the cadence asked to promote a retry when it falls
due. :class:`~echomq.consumers.consumer.Consumer` and
:class:`~echomq.consumers.batch.BatchConsumer` settle through one each."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from echomq.consumers.log_fields import job_fields
from echomq.engine.checks import ms, traceback_text
from echomq.engine.results import CompleteOutcome, Failed, Job, RetryOutcome
from echomq.engine.settler import Settler
from echomq.errors import EchoMQError, InvalidArgument

if TYPE_CHECKING:
    from echomq.consumers.cadence import Cadence
    from echomq.engine.queue import Queue

log = logging.getLogger("echomq.consumer")

#: A retry's answers that settled it (``gone``: nothing left to redo); any other is lost.
_RETRY_ANSWERS = ("scheduled", "dead", "cancelled", "gone")

Outcome = Literal["completed", "retried", "deferred", "dead", "cancelled", "lost"]


class Observer(Protocol):
    """Told what a consumer claimed and how each job settled (``echomq.metrics.Metrics`` is
    one). Called on the consumer's hot path: implementations must be quick and never raise."""

    def claimed(self, queue: str, jobs: Sequence[Job], lease_ms: int) -> None: ...

    def settled(self, queue: str, job: Job, outcome: Outcome) -> None: ...


@dataclass(slots=True)
class Tally:
    """What a consumer did since it started."""

    completed: int = 0
    retried: int = 0
    dead: int = 0
    lost: int = 0  # settles refused because the lease had moved on (the job is not lost)
    claims: int = 0
    deferred: int = 0
    cooled: int = 0  # jobs a handler's Cool put back (their lane cooled)
    cancelled: int = 0  # jobs a cancel stopped (or whose failure it kept from a retry)


def describe(exc: BaseException) -> str:
    """An exception as a failed attempt's error text: ``Type: message`` (``Type`` alone)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Ledger:
    """Settles the jobs of one claim loop on ``queue`` and books what became of each."""

    def __init__(
        self, queue: Queue, name: str, cadence: Cadence, observer: Observer | None, lease: float
    ) -> None:
        self.queue = queue
        self.name = name
        self.cadence = cadence
        self.observer = observer
        self.tally = Tally()
        self._lease_ms = ms(lease, "lease")  # the claim's lease, as the engine got it
        self._settler = Settler(queue, self._completed, self._retried)

    def claimed(self, jobs: Sequence[Job]) -> None:
        """Tell the observer of one claim's ``jobs``."""
        if self.observer is not None and jobs:
            self.observer.claimed(self.queue.name, jobs, self._lease_ms)

    def complete(self, job: Job, value: Any, ran: float = 0.0) -> None:
        """Complete ``job`` with ``value`` as its result (kept while the queue's result_ttl
        lasts), its handler having run ``ran`` seconds (fairness by time charges its lane that;
        0: the time it held its lease). Encoded here: ``InvalidArgument``, and nothing settled,
        when the queue's codec refuses it, so such a result fails its own attempt alone."""
        ran_ms = math.ceil(ran * 1000) if ran > 0 else 0
        self._settler.complete(job, self.queue.encode_result(value), ran_ms)

    def fail(
        self,
        job: Job,
        error: str,
        delay: float,
        max_attempts: int,
        formatted: str | None = None,
    ) -> None:
        """Retry ``job`` after ``delay`` seconds, or bury it at ``max_attempts`` failures, with
        ``error`` (and the ``formatted`` traceback) on its row."""
        failed = Failed(job, error[:2000], delay, max_attempts, traceback_text(formatted))
        try:
            ms(delay, "delay")  # checked here, so a bad delay costs this job alone
        except InvalidArgument as exc:
            self._retried(failed, exc)  # lost: its lease expires and it is run again
            return
        self._settler.retry(failed)

    def observe(self, job: Job, outcome: Outcome) -> None:
        """Tell the observer how ``job`` settled."""
        if self.observer is not None:
            self.observer.settled(self.queue.name, job, outcome)

    def lost(self, job: Job, verb: str, outcome: object) -> None:
        """A settle that did not take: the lease decides (it expires and the job is reaped and
        run again), nothing is lost."""
        self.tally.lost += 1
        log.warning(
            "%s: could not %s job %s: %s", self.name, verb, job.id, outcome, extra=job_fields(job)
        )

    async def drain(self) -> None:
        """Wait until every settle handed over so far has its answer."""
        await self._settler.drain()

    def _completed(self, job: Job, outcome: CompleteOutcome | EchoMQError) -> None:
        """The settler's answer for one completed job ("gone" counts: nothing to redo)."""
        if isinstance(outcome, str) and outcome in ("completed", "gone"):
            self.tally.completed += 1
            settled: Outcome = "completed"
        else:
            self.lost(job, "complete", outcome)
            settled = "lost"
        if self.observer is not None:  # inline: once per job
            self.observer.settled(self.queue.name, job, settled)

    def _retried(self, failed: Failed, outcome: RetryOutcome | EchoMQError) -> None:
        """The settler's answer for one failed job: retried, dead (logged), cancelled (a cancel
        marked it while it ran: not retried) or lost."""
        settled = self._count_retry(failed, outcome)
        if outcome == "scheduled" and failed.delay > 0:
            # Asked once the job is on the schedule, never before its write: an upkeep that
            # began in between would answer without it, and this request would be lost.
            self.cadence.soon(time.monotonic(), failed.delay)
        self.observe(failed.job, settled)

    def _count_retry(self, failed: Failed, outcome: RetryOutcome | EchoMQError) -> Outcome:
        if not isinstance(outcome, str) or outcome not in _RETRY_ANSWERS:
            self.lost(failed.job, "retry", outcome)
            return "lost"
        if outcome == "cancelled":
            self.tally.cancelled += 1
            return "cancelled"
        if outcome == "dead":
            self.tally.dead += 1
            job = failed.job
            log.warning(
                "%s: job %s is dead at attempt %d: %s",
                self.name, job.id, job.attempts, failed.error, extra=job_fields(job),
            )  # fmt: skip
            return "dead"
        self.tally.retried += 1
        return "retried"

"""How a claim loop works (:class:`ConsumerOptions`) and how a failed attempt goes on
(:class:`RetryPlan`, decided by a :data:`Policy`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from echomq.engine.backoff import Backoff, Exponential, Jitter
from echomq.engine.checks import MAX_ATTEMPTS, MAX_BATCH, MAX_LEASE, count, ms
from echomq.engine.results import Job


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    """How a consumer works. Durations are seconds (``float``), as everywhere in echomq.

    Attributes:
        concurrency: jobs in hand at once.
        lease: seconds a claim holds a job before it may be reaped (extended while it runs).
        beat: seconds between upkeeps (promote, reap) and the longest park on the wake list.
        max_attempts: failed attempts in all before a job is dead.
        backoff: the delay before each retry (seconds, computed host-side).
        batch: most jobs per claim; ``None`` claims the free slots in one call.
        max_stalled: expired leases (crashes) a job survives before it is dead as ``stalled``.
        stop_timeout: seconds jobs in hand may take to finish after ``stop()``.
        upkeep: whether this consumer runs the upkeep (a metronome runs it for a pool).
        idle_upkeep: longest an idle consumer goes without upkeep, in seconds.
        claims_in_flight: most claims kept in flight at once on the connection.
    """

    concurrency: int = 10
    lease: float = 30.0
    beat: float = 1.0
    max_attempts: int = 3
    backoff: Backoff = field(default_factory=lambda: Jitter(Exponential(1.0, 60.0)))
    #: Most jobs per claim. ``None`` (the default) claims as many as there are free slots, in
    #: one call that walks the ring turn by turn (weights and ceilings hold as for single
    #: claims); 1 claims one job per call.
    batch: int | None = None
    max_stalled: int = 3
    stop_timeout: float = 30.0
    upkeep: bool = True
    #: Longest an idle consumer goes without upkeep (bounds how late a crashed peer's expired
    #: lease is reaped); otherwise upkeep runs when the engine says something falls due.
    idle_upkeep: float = 10.0
    #: Most claims one consumer keeps in flight at once (pipelined on its connection).
    claims_in_flight: int = 16

    def __post_init__(self) -> None:
        count(self.concurrency, "concurrency")
        count(self.claims_in_flight, "claims_in_flight", maximum=MAX_BATCH)
        if self.batch is not None:
            count(self.batch, "batch", maximum=MAX_BATCH)
        for name in ("max_attempts", "max_stalled"):
            count(getattr(self, name), name, maximum=MAX_ATTEMPTS)
        ms(self.lease, "lease", positive=True, most=MAX_LEASE)
        for name in ("beat", "stop_timeout", "idle_upkeep"):
            ms(getattr(self, name), name, positive=True)


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """What a consumer's failure policy decides for an attempt that raised: the error text the
    row keeps, the delay before the next attempt (seconds), the attempts allowed in all, and
    whether the traceback is worth an ERROR record and a place on the row."""

    error: str
    delay: float
    max_attempts: int
    traceback: bool = True


#: ``policy(job, exc)`` → the :class:`RetryPlan` of a failed attempt (say, per job type).
Policy = Callable[[Job, Exception], RetryPlan]

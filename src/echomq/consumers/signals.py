"""The signals a handler raises to say what becomes of its job: :class:`Retry` (after a delay,
counted as an attempt), :class:`Defer` (later, not counted), :class:`Cool` (the whole lane
cools; not counted) and :class:`Drop` (dead at once)."""

from __future__ import annotations

import time

from echomq.engine.lanes import cool_end

__all__ = ["Cool", "Defer", "Drop", "Retry"]


class Retry(Exception):
    """Raise from a handler to retry the job after ``after`` seconds (counts as an attempt)."""

    def __init__(self, after: float, reason: str = "retry requested") -> None:
        super().__init__(reason)
        self.after = after


class Defer(Exception):
    """Raise from a handler to run the job again after ``after`` seconds without counting an
    attempt: the work was not tried (a budget said later), so it is no failure."""

    def __init__(self, after: float, reason: str = "deferred") -> None:
        super().__init__(reason)
        self.after = after


class Cool(Exception):
    """Raise from a handler when an upstream said "not before" for the job's whole lane (a
    429's ``retry_after``, a tenant's quota): the job goes back to its place in its lane
    without counting an attempt, and the lane leaves the ring for ``after`` seconds (or until
    the Unix time ``until``) for every worker, in one step; the other lanes keep being served.
    Checked when raised: :class:`~echomq.InvalidArgument` names the argument."""

    def __init__(
        self, after: float | None = None, reason: str | None = None, *, until: float | None = None
    ) -> None:
        cool_end(after, until, "after")
        super().__init__(reason or "cooling")
        self.after = after
        self.until = until
        self.reason = reason

    def seconds(self) -> float:
        """Seconds from now until the cool ends (host clock for ``until``)."""
        if self.after is not None:
            return self.after
        assert self.until is not None
        return max(self.until - time.time(), 0.0)


class Drop(Exception):
    """Raise from a handler to dead-letter the job at once with ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

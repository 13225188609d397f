"""When the ``--processes`` supervisor starts a slot's next child: at once after a child that had
been working (an OOM kill, a spot reclaim), after a capped doubling delay after children that
die before they are ready (a crash loop). Pure values: no clock, no process, no I/O.

A child *had been working* when it told the supervisor it was ready (its connection open, its
startup hooks run, its consumers started). Readiness, not age: a child killed a second after it
began claiming is one the pool needs back now, and a startup hook that hangs a minute and then
raises is still a crash loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from echomq.errors import InvalidArgument


@dataclass(frozen=True)
class RestartPolicy:
    """``base``: the delay after the first child in a row that died before it was ready (s);
    each further one doubles it, up to ``cap`` (s). After a ready child: no delay."""

    base: float = 0.5
    cap: float = 30.0

    def __post_init__(self) -> None:
        if not (isinstance(self.base, int | float) and math.isfinite(self.base) and self.base > 0):
            raise InvalidArgument("base", self.base, "a positive number of seconds")
        if not (isinstance(self.cap, int | float) and math.isfinite(self.cap)):
            raise InvalidArgument("cap", self.cap, "a number of seconds")
        if self.cap < self.base:
            raise InvalidArgument("cap", self.cap, f"at least base ({self.base} s)")

    def delay(self, slot: Slot) -> float:
        """Seconds before ``slot`` starts its next child."""
        if slot.early_exits == 0:
            return 0.0
        # The exponent is bounded before it is raised: a slot that crashed 2,000 times in a
        # row waits the cap, it does not overflow a float.
        doublings = min(slot.early_exits - 1, math.ceil(math.log2(self.cap / self.base)) + 1)
        return float(min(self.cap, self.base * 2**doublings))


@dataclass(frozen=True)
class Slot:
    """One place in the pool: how many of its children in a row died before they were ready."""

    early_exits: int = 0

    def exited(self, *, was_ready: bool) -> Slot:
        """The slot after its child exited (non-zero, while the supervisor was not stopping)."""
        return Slot(0 if was_ready else self.early_exits + 1)

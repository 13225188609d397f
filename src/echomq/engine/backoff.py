"""Backoff policies: how long a failed job waits before its next attempt. Computed host-side.

``attempt`` is the attempt that just failed, 1-based. Durations are seconds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from echomq.errors import InvalidArgument


class Backoff(Protocol):
    def delay(self, attempt: int) -> float: ...


def _non_negative(value: float, argument: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise InvalidArgument(argument, value, "must be a number of seconds >= 0")
    return float(value)


@dataclass(frozen=True, slots=True)
class Fixed:
    """The same wait after every failure."""

    seconds: float

    def __post_init__(self) -> None:
        _non_negative(self.seconds, "seconds")

    def delay(self, attempt: int) -> float:
        return self.seconds


@dataclass(frozen=True, slots=True)
class Exponential:
    """``base · 2^(attempt−1)``, never more than ``cap``."""

    base: float
    cap: float

    def __post_init__(self) -> None:
        _non_negative(self.base, "base")
        _non_negative(self.cap, "cap")

    def delay(self, attempt: int) -> float:
        return min(self.base * 2.0 ** max(0, attempt - 1), self.cap)


@dataclass(frozen=True, slots=True)
class Jitter:
    """Full jitter: uniform in ``[0, inner.delay(attempt)]``, so a failing herd spreads out."""

    inner: Backoff
    rng: random.Random | None = None

    def delay(self, attempt: int) -> float:
        uniform = random.uniform if self.rng is None else self.rng.uniform
        return uniform(0, self.inner.delay(attempt))

"""Argument checks shared by every public call: they run before any wire traffic and say what
was wrong. Also the one decoder of the engine's bytes into text."""

from __future__ import annotations

import math
from typing import Any

from ._errors import InvalidArgument


def ms(seconds: float, argument: str, *, positive: bool = False) -> int:
    """Seconds → whole ms for the engine; refuses negatives (and zero when ``positive``)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        raise InvalidArgument(argument, seconds, "must be a number of seconds")
    if seconds < 0 or (positive and seconds <= 0):
        raise InvalidArgument(argument, seconds, "must be > 0" if positive else "must be >= 0")
    if math.isinf(seconds):
        raise InvalidArgument(argument, seconds, "must be finite")
    return max(1, math.ceil(seconds * 1000)) if positive else math.ceil(seconds * 1000)


def count(value: int, argument: str, *, minimum: int = 1) -> int:
    """An integer of at least ``minimum`` (booleans refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(argument, value, f"must be an integer >= {minimum}")
    return value


def text(value: Any) -> str:
    """A reply from the engine (bytes) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)

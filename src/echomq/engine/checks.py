"""Argument checks shared by every public call, and the one table of their bounds.

Every number that crosses into a script is checked here before any wire traffic, with an error
naming the argument and the bound; the scripts check the same bounds again before their first
write (``int_arg`` in ``lua/_lib.lua``), so a refused call writes nothing either way. Also the one
decoder of the engine's bytes into text.
"""

from __future__ import annotations

import math
from typing import Any, Final

from echomq.errors import InvalidArgument

#: The longest duration any argument may span (delays, windows, dedup TTLs): 10 years. Lua
#: numbers are doubles, exact to 2**53; 10 years of ms stay far below that.
MAX_DURATION: Final = 10 * 365 * 86_400
#: The longest lease one claim or extend may grant: a day (long jobs extend their lease).
MAX_LEASE: Final = 86_400
#: Most jobs one claim_batch may lease (one script call pops them all).
MAX_BATCH: Final = 1_000
#: Most items one bounded sweep may touch: promote, reap and upkeep limits, dead-letter pages.
MAX_LIMIT: Final = 10_000
#: Most failed attempts or stalls a job may be allowed.
MAX_ATTEMPTS: Final = 1_000
#: The largest lane weight (claims per ring visit).
MAX_WEIGHT: Final = 1_000
#: The largest concurrency ceiling, of a queue or a lane.
MAX_CEILING: Final = 1_000_000
#: The largest lane backlog cap (unfinished jobs a lane may hold at admission).
MAX_CAP: Final = 1_000_000_000
#: The most claims a rate budget may allow per window, and the largest bucket rate and burst.
MAX_RATE: Final = 1_000_000_000
#: The largest fencing token (a job's attempts): Lua's integers are exact up to 2**53 - 1.
MAX_TOKEN: Final = (1 << 53) - 1
#: The largest encoded payload: 16 MiB (a job carries a reference, not a file).
MAX_PAYLOAD: Final = 16 << 20
#: The longest error text a retry keeps as ``last_error``; longer text is cut, not refused.
MAX_ERROR: Final = 16 << 10
#: The longest traceback a failed attempt keeps on its row, in bytes: the tail is kept.
MAX_TRACEBACK: Final = 8 << 10
#: The longest a completed job's row may be kept as its result (``result_ttl``): 30 days.
MAX_RESULT_TTL: Final = 30 * 86_400
#: A timestamp above this many seconds (the year 5138) is a millisecond value by mistake.
MAX_UNIX_SECONDS: Final = 100_000_000_000


def _span(seconds: float) -> str:
    if seconds >= 365 * 86_400:
        return f"{seconds / (365 * 86_400):g} years"
    if seconds >= 86_400:
        return f"{seconds / 86_400:g} days"
    return f"{seconds:g} s"


def ms(seconds: float, argument: str, *, positive: bool = False, most: float = MAX_DURATION) -> int:
    """Seconds → whole ms for the engine; refuses negatives (zero too when ``positive``),
    non-numbers, NaN, infinities and anything beyond ``most`` seconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        raise InvalidArgument(argument, seconds, "must be a number of seconds")
    if seconds < 0 or (positive and seconds <= 0):
        raise InvalidArgument(argument, seconds, "must be > 0" if positive else "must be >= 0")
    if seconds > most:
        raise InvalidArgument(argument, seconds, f"must be at most {most:g} s ({_span(most)})")
    return max(1, math.ceil(seconds * 1000)) if positive else math.ceil(seconds * 1000)


def count(value: int, argument: str, *, minimum: int = 1, maximum: int = MAX_CEILING) -> int:
    """An integer in ``[minimum, maximum]`` (booleans refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, value, f"must be an integer, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidArgument(argument, value, f"must be an integer in [{minimum}, {maximum}]")
    return value


def error_text(error: object) -> str:
    """A failure's text as ``last_error`` keeps it: at most ``MAX_ERROR`` characters."""
    message = error if isinstance(error, str) else str(error)
    if not message.isascii():  # a lone surrogate cannot cross the wire: replaced, not refused
        message = message.encode("utf-8", "replace").decode()
    if len(message) <= MAX_ERROR:
        return message
    return message[: MAX_ERROR - 1] + "…"


def utf8_size(value: str, argument: str) -> int:
    """The bytes of ``value`` in UTF-8, as the wire sends it; a str that has none (a lone
    surrogate, from a bad decode upstream) is refused, naming ``argument``, before any write."""
    try:
        return len(value.encode())
    except UnicodeEncodeError as error:
        raise InvalidArgument(
            argument,
            value,
            f"holds a lone surrogate {value[error.start]!r} at position {error.start}: "
            "not a character, it has no UTF-8 encoding",
        ) from None


def traceback_text(traceback: str | None) -> str:
    """A failed attempt's traceback as its row keeps it: "" for none, else its last
    ``MAX_TRACEBACK`` bytes of UTF-8 (the tail says where it failed; cut, never refused)."""
    if not traceback:
        return ""
    if not isinstance(traceback, str):
        raise InvalidArgument("traceback", traceback, "must be a str or None")
    data = traceback.encode("utf-8", "replace")
    if len(data) <= MAX_TRACEBACK:
        return data.decode("utf-8")
    # "…" is 3 bytes; a cut through a character drops its stray continuation bytes.
    return "…" + data[len(data) - MAX_TRACEBACK + 3 :].decode("utf-8", "ignore")


def text(value: Any) -> str:
    """A reply from the engine (bytes) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)

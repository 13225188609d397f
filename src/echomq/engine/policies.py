"""Lane policies: the settings a lane runs under, stated once and applied by every process.

A :class:`Policy` states a lane's rate, ceiling, weight and backlog cap; a queue's policies are a
default for every lane not named plus the named lanes' own (``Queue.apply_policies``). They live
in the engine: the claim (admission, for the cap) reads a lane's own setting, else the default,
so no per-tenant write is needed, and applying the policies in force writes nothing (no fresh
budget, no window restarted).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from echomq.engine.checks import MAX_CAP, MAX_CEILING, MAX_RATE, MAX_WEIGHT, count, ms, text
from echomq.engine.keys import validate_group
from echomq.errors import InvalidArgument

#: How a rate counts: ``smooth`` (a sliding window: no ``window`` seconds ever hold more than
#: ``max`` claims) or ``fixed`` (back-to-back windows, each admitting ``max``: up to twice
#: ``max`` can start across a window boundary).
RateMode = Literal["smooth", "fixed"]
#: How a lane's turn on the ring is measured: in claims (``count``, the default), in units
#: (``cost``: each job's ``cost``) or in run time (``time``: each job's measured run time).
FairBy = Literal["count", "cost", "time"]
#: The longest quantum fairness by time takes (a visit's grant per unit of weight), seconds.
MAX_QUANTUM_SECONDS: Final = 3_600.0
#: The largest quantum fairness by cost takes, units.
MAX_QUANTUM_UNITS: Final = 1_000_000
#: The mode a rate gets when none is said: what upstream APIs enforce (docs/concepts/gates.md).
DEFAULT_MODE: Final[RateMode] = "smooth"
#: A smooth rate keeps the server time of each claim in its window: at most this many.
MAX_SMOOTH_RATE: Final = 10_000
#: Named lanes per ``apply_policies`` call (one script call writes them all).
MAX_POLICIES: Final = 10_000


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``max`` claims per ``window`` seconds, counted as ``mode`` says."""

    max: int
    window: float
    mode: RateMode = DEFAULT_MODE

    def __post_init__(self) -> None:
        rate_value(self.max, self.window, self.mode)  # checked once, where it is made

    @classmethod
    def of(cls, value: Rate | tuple[int, float], argument: str = "rate") -> Rate:
        """``value`` as a Rate: a Rate, or a ``(max, window seconds)`` pair (smooth)."""
        if isinstance(value, Rate):
            return value
        if not isinstance(value, tuple) or len(value) != 2:
            raise InvalidArgument(argument, value, "must be a Rate or a (max, window seconds) pair")
        return cls(*value)

    @property
    def value(self) -> str:
        """As the engine stores it: ``max:window_ms`` (fixed) or ``max:window_ms:smooth``."""
        return rate_value(self.max, self.window, self.mode)


@dataclass(frozen=True, slots=True)
class Policy:
    """A lane's settings: ``rate`` (a :class:`Rate` or ``(max, window seconds)``, smooth),
    ``limit`` (jobs leased at once), ``weight`` (claims per ring visit) and ``cap`` (unfinished
    jobs, pending, leased and scheduled, that admission lets the lane hold: beyond it an
    enqueue raises :class:`~echomq.LaneFull`, a batch item answers ``rejected``). A field left
    None follows the queue's default policy (for the default itself: none)."""

    rate: Rate | tuple[int, float] | None = None
    limit: int | None = None
    weight: int | None = None
    cap: int | None = None

    def __post_init__(self) -> None:
        if self.rate is not None:
            object.__setattr__(self, "rate", Rate.of(self.rate))
        if self.limit is not None:
            count(self.limit, "limit", maximum=MAX_CEILING)
        if self.weight is not None:
            count(self.weight, "weight", maximum=MAX_WEIGHT)
        if self.cap is not None:
            count(self.cap, "cap", maximum=MAX_CAP)

    def values(self) -> tuple[str, str, str, str]:
        """Ceiling, weight, rate and cap as the engine stores them ("" = not set)."""
        rate = self.rate.value if isinstance(self.rate, Rate) else ""
        limit = "" if self.limit is None else str(self.limit)
        cap = "" if self.cap is None else str(self.cap)
        return limit, "" if self.weight is None else str(self.weight), rate, cap

    def to_json(self) -> str:
        found: dict[str, Any] = {}
        if isinstance(self.rate, Rate):
            found["rate"] = [self.rate.max, self.rate.window, self.rate.mode]
        if self.limit is not None:
            found["limit"] = self.limit
        if self.weight is not None:
            found["weight"] = self.weight
        if self.cap is not None:
            found["cap"] = self.cap
        return json.dumps(found, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: Any) -> Policy:
        found = json.loads(text(raw))
        rate = found.get("rate")
        return cls(
            rate=None if rate is None else Rate(int(rate[0]), float(rate[1]), rate[2]),
            limit=found.get("limit"),
            weight=found.get("weight"),
            cap=found.get("cap"),
        )


@dataclass(frozen=True, slots=True)
class Policies:
    """A queue's policies as the engine holds them: the default and the named lanes'."""

    default: Policy
    lanes: Mapping[str, Policy]


def rate_value(max: int, window: float | None, mode: str = DEFAULT_MODE) -> str:
    """A rate as the engine stores it, every part checked (``InvalidArgument`` names it)."""
    if mode not in ("smooth", "fixed"):
        raise InvalidArgument("mode", mode, 'must be "smooth" or "fixed"')
    most = count(max, "max", maximum=MAX_SMOOTH_RATE if mode == "smooth" else MAX_RATE)
    if window is None:
        raise InvalidArgument("window", window, "a rate needs a window in seconds")
    window_ms = ms(window, "window", positive=True)
    return f"{most}:{window_ms}:smooth" if mode == "smooth" else f"{most}:{window_ms}"


def parse_rate(raw: Any) -> Rate | None:
    """A stored rate (``max:window_ms[:smooth]``) as a :class:`Rate`; None for "" or None."""
    value = "" if raw is None else text(raw)
    if not value:
        return None
    parts = value.split(":")
    mode: RateMode = "smooth" if len(parts) > 2 and parts[2] == "smooth" else "fixed"
    return Rate(int(parts[0]), int(parts[1]) / 1000, mode)


def policy_args(
    policies: Mapping[str, Policy] | None, default: Policy | None, named: Mapping[str, Policy]
) -> list[str]:
    """``policy.lua``'s ARGV for these policies, every lane name and value checked first."""
    lanes: dict[str, Policy] = {}
    for source in (policies or {}, named):
        if not isinstance(source, Mapping):
            raise InvalidArgument("policies", source, "must be a mapping of lane -> Policy")
        for group, policy in source.items():
            if not isinstance(policy, Policy):
                raise InvalidArgument(f"policy of {group!r}", policy, "expected a Policy")
            lanes[validate_group(group)] = policy
    if len(lanes) > MAX_POLICIES:
        raise InvalidArgument("policies", len(lanes), f"at most {MAX_POLICIES} lanes per call")
    if default is not None and not isinstance(default, Policy):
        raise InvalidArgument("default", default, "expected a Policy")
    args = list((default or Policy()).values())
    for group, policy in lanes.items():
        args += [group, *policy.values(), policy.to_json()]
    return args


@dataclass(frozen=True, slots=True)
class Fairness:
    """How the queue measures a lane's turn (:meth:`echomq.Queue.fairness`): ``by`` claims,
    units or run time, and the ``quantum`` set (units by cost, seconds by time; None: the
    default)."""

    by: FairBy = "count"
    quantum: float | None = None

    @classmethod
    def from_meta(cls, fair: Any, quantum: Any) -> Fairness:
        """As the engine stores it (meta ``fair``, ``quantum``)."""
        by = text(fair) if fair is not None else ""
        if by not in ("cost", "time"):
            return cls()
        raw = int(text(quantum)) if quantum is not None else None
        value = raw if by == "cost" or raw is None else raw / 1000
        return cls("cost" if by == "cost" else "time", value)


def fairness_args(by: str, quantum: float | None) -> tuple[str, str, str, str]:
    """``configure.lua``'s fields for :meth:`echomq.Queue.fairness`, each part checked
    (``InvalidArgument`` names it) before anything is written."""
    if by not in ("count", "cost", "time"):
        raise InvalidArgument("by", by, 'must be "count", "cost" or "time"')
    if by == "count":
        if quantum is not None:
            raise InvalidArgument("quantum", quantum, 'only "cost" and "time" take a quantum')
        return ("fair", "", "quantum", "")
    if quantum is None:
        return ("fair", by, "quantum", "")
    if by == "cost":
        if isinstance(quantum, bool) or not isinstance(quantum, int):
            raise InvalidArgument("quantum", quantum, "by cost, must be a whole number of units")
        return ("fair", by, "quantum", str(count(quantum, "quantum", maximum=MAX_QUANTUM_UNITS)))
    window_ms = ms(quantum, "quantum", positive=True, most=MAX_QUANTUM_SECONDS)
    return ("fair", by, "quantum", str(window_ms))

"""Where a job stands: its place in its lane and an estimate of its wait until a claim.

``eta.lua`` reads, in one pure step, the job's rank in its lane, every lane with pending work
(depth, weight, ceiling, rate, paused, cooling) and the queue's measured service rate (the
``served`` hash the claim keeps). :func:`estimate` turns that into an :class:`Eta` with a fluid
model of the ring: the lanes share the service rate by weight, each capped by its rate budget
and by its ceiling over the mean run time, a lane that empties hands its share to the others
(docs/guides/where-a-tenant-stands.md argues the model and states its measured error).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from echomq.engine.checks import text
from echomq.engine.policies import parse_rate

#: Seconds: the time constant of the claim rate the engine measures (``served`` in _lib.lua).
SERVED_TAU: Final = 5.0
#: A measurement younger than this is scaled up as if this old: one claim is no rate.
SERVED_WARMUP: Final = 1.0
#: Phases of the fluid model (one per lane that empties first) before the rest is extrapolated
#: at the rates of the last phase: the cost stays O(phases x lanes log lanes).
MAX_PHASES: Final = 32

#: What sets the lane's rate: its weighted share of the service rate, its rate budget, its
#: ceiling over the mean run time; or why there is no estimate: the lane or queue is paused,
#: the lane cools, no claims were measured and nothing else bounds the lane (``idle``).
Bound = Literal["share", "rate", "ceiling", "paused", "cooling", "idle"]


@dataclass(frozen=True, slots=True)
class Eta:
    """A job's place and expected wait (:meth:`echomq.Queue.position`, ``lane.eta()``).

    ``position`` jobs of its lane are ahead of it (0: it is next); ``turns`` visits of the ring
    to its lane reach it (``position // weight + 1``); ``seconds`` the estimated wait until a
    worker claims it, None when ``bound`` says it waits on no rate (``paused``, ``cooling``,
    ``idle``); ``rate`` the claims per second its lane is expected to get now, and ``bound``
    what sets it; ``service_rate`` the queue's measured claims per second (0: none measured).
    """

    lane: str
    position: int
    turns: int
    seconds: float | None
    rate: float | None
    bound: Bound
    service_rate: float


@dataclass(frozen=True, slots=True)
class LaneLoad:
    """One lane as the model sees it: work left, weight, and the caps on its rate (claims/s,
    None = none): ``rate_cap`` from its rate budget, ``ceiling_cap`` from its ceiling."""

    lane: str
    left: float
    weight: int
    rate_cap: float | None = None
    ceiling_cap: float | None = None

    @property
    def cap(self) -> float:
        caps = [c for c in (self.rate_cap, self.ceiling_cap) if c is not None]
        return min(caps) if caps else math.inf

    def bound(self, rate: float) -> Bound:
        """What holds the lane at ``rate``."""
        if self.rate_cap is not None and rate >= self.rate_cap * (1 - 1e-9):
            return "rate"
        if self.ceiling_cap is not None and rate >= self.ceiling_cap * (1 - 1e-9):
            return "ceiling"
        return "share"


def service_rate(raw: Any, at_ms: int, since_ms: int, now_ms: int) -> float:
    """The queue's claims per second now, from the decayed count the claim keeps: decayed to
    ``now`` and, while younger than the time constant, scaled up for the time it has run."""
    if raw in (None, b"", ""):
        return 0.0
    rate = float(text(raw)) * math.exp((at_ms - now_ms) / (SERVED_TAU * 1000))
    age = max((now_ms - since_ms) / 1000, SERVED_WARMUP)
    return rate / (1 - math.exp(-age / SERVED_TAU))


def shares(loads: Sequence[LaneLoad], mu: float) -> list[float]:
    """Water-filling: each lane gets ``weight / W`` of ``mu``, W the weights of the lanes not
    held below that by a cap; a capped lane's rest goes to the others. ``mu`` 0 (nothing
    measured): each lane at its cap (inf when it has none)."""
    if mu <= 0:
        return [load.cap for load in loads]
    rates = [0.0] * len(loads)
    order = sorted(range(len(loads)), key=lambda i: loads[i].cap / loads[i].weight)
    left, weights = mu, float(sum(load.weight for load in loads))
    for n, i in enumerate(order):
        load = loads[i]
        fair = left * load.weight / weights
        if load.cap >= fair:
            for j in order[n:]:
                rates[j] = left * loads[j].weight / weights
            break
        rates[i] = load.cap
        left -= load.cap
        weights -= load.weight
    return rates


def drain(loads: Sequence[LaneLoad], mu: float, target: int) -> tuple[float | None, float]:
    """Seconds until lane ``loads[target]`` has served its ``left`` (fluid, phase by phase: a
    lane that empties gives its share to the rest) and its rate in the first phase. None when
    it gets no finite rate (nothing measured and nothing caps it, or a rate of 0)."""
    live = [i for i, load in enumerate(loads) if load.left > 0 or i == target]
    left = {i: loads[i].left for i in live}
    first: float | None = None
    elapsed = 0.0
    for phase in range(MAX_PHASES + 1):
        rates = dict(zip(live, shares([loads[i] for i in live], mu), strict=True))
        mine = rates[target]
        if first is None:
            first = mine
            if left[target] <= 0:
                return 0.0, first
        if not 0 < mine < math.inf:
            return None, first
        finish = left[target] / mine
        # The next lane to empty; an uncapped lane's infinite rate (nothing measured) empties
        # it at once: it takes no time from the others.
        step = min(left[i] / r for i, r in rates.items() if r > 0)
        if finish <= step or phase == MAX_PHASES:
            return elapsed + finish, first
        elapsed += step
        live = [i for i in live if i == target or left[i] - rates[i] * step > 1e-9]
        left = {i: left[i] - rates[i] * step for i in live}
    raise AssertionError("unreachable: the last phase answers")


def drain_all(loads: Sequence[LaneLoad], mu: float) -> list[tuple[float | None, float]]:
    """:func:`drain` for every lane at once, in one run of the model: each lane's seconds
    until its ``left`` is served (None: no finite rate) and its rate in the first phase."""
    first = shares(loads, mu)
    done: list[float | None] = [0.0 if load.left <= 0 else None for load in loads]
    live = [i for i, load in enumerate(loads) if load.left > 0]
    left = {i: loads[i].left for i in live}
    elapsed = 0.0
    for phase in range(MAX_PHASES + 1):
        rates = dict(zip(live, shares([loads[i] for i in live], mu), strict=True))
        live = [i for i in live if 0 < rates[i]]  # no rate: never served
        if not live:
            break
        step = min(left[i] / rates[i] for i in live)
        if phase == MAX_PHASES or not math.isfinite(step):
            for i in live:
                if math.isfinite(rates[i]):
                    done[i] = elapsed + left[i] / rates[i]
            break
        elapsed += step
        for i in live:
            left[i] -= rates[i] * step if math.isfinite(rates[i]) else left[i]
            if left[i] <= 1e-9:
                done[i] = elapsed if math.isfinite(rates[i]) else None
        live = [i for i in live if left[i] > 1e-9]
    return list(zip(done, first, strict=True))


@dataclass(frozen=True, slots=True)
class _Read:
    """``eta.lua``'s answer, decoded: the head and one row per lane (the job's lane first)."""

    lane: str
    ahead: int
    queue_paused: bool
    mu: float
    run: float | None
    rows: list[tuple[str, int, int, int, float | None, bool, bool]]


def _read(reply: list[Any]) -> _Read:
    now, leased = int(reply[6]), int(reply[7])
    mu = service_rate(reply[3], int(reply[4]), int(reply[5]), now)
    rows = []
    for i in range(8, len(reply), 8):
        name, depth, weight, limit, _leased, raw_rate, paused, cool = reply[i : i + 8]
        rate = parse_rate(raw_rate)
        rows.append(
            (
                text(name),
                int(depth),
                int(weight),
                int(limit),
                None if rate is None else rate.max / rate.window,
                bool(int(paused)),
                int(cool) > 0,
            )
        )
    # Little's law over the queue: leased jobs = claims/s x mean run time.
    run = leased / mu if mu > 0 and leased > 0 else None
    return _Read(text(reply[0]), int(reply[1]), bool(int(reply[2])), mu, run, rows)


def _load(
    row: tuple[str, int, int, int, float | None, bool, bool], left: int, run: float | None
) -> LaneLoad:
    name, _depth, weight, limit, rate_cap, _paused, _cooling = row
    ceiling = limit / run if limit and run else None
    return LaneLoad(name, left, weight, rate_cap=rate_cap, ceiling_cap=ceiling)


def _eta(
    lane: str,
    ahead: int,
    weight: int,
    why: Bound | None,
    found: tuple[float | None, float],
    mu: float,
    load: LaneLoad,
) -> Eta:
    turns = ahead // max(weight, 1) + 1
    if why is not None:
        return Eta(lane, ahead, turns, None, None, why, mu)
    seconds, rate = found
    if seconds is None or not math.isfinite(rate):
        return Eta(lane, ahead, turns, None if ahead else 0.0, None, "idle", mu)
    return Eta(lane, ahead, turns, seconds, rate, load.bound(rate), mu)


def _why(queue_paused: bool, paused: bool, cooling: bool) -> Bound | None:
    if queue_paused or paused:
        return "paused"
    return "cooling" if cooling else None


def estimate(reply: list[Any]) -> Eta:
    """``eta.lua``'s answer for one job or lane (not nil) as an :class:`Eta`."""
    read = _read(reply)
    # Lanes off the ring (paused, cooling) take no share; the job's lane is row 0.
    rows = [read.rows[0], *(r for r in read.rows[1:] if not (r[5] or r[6]))]
    loads = [_load(r, read.ahead if n == 0 else r[1], read.run) for n, r in enumerate(rows)]
    me = read.rows[0]
    why = _why(read.queue_paused, me[5], me[6])
    found = drain(loads, read.mu, 0) if why is None else (None, 0.0)
    return _eta(read.lane, read.ahead, me[2], why, found, read.mu, loads[0])


def estimate_all(reply: list[Any]) -> dict[str, Eta]:
    """``eta.lua``'s answer for every lane (no job) as each lane's :class:`Eta` for a job
    enqueued on it now, from one run of the model."""
    read = _read(reply)
    serving = [r for r in read.rows if not (r[5] or r[6])]
    loads = [_load(r, r[1], read.run) for r in serving]
    found = dict(zip((r[0] for r in serving), drain_all(loads, read.mu), strict=True))
    by_name = {load.lane: load for load in loads}
    out: dict[str, Eta] = {}
    for row in read.rows:
        name, depth, weight = row[0], row[1], row[2]
        why = _why(read.queue_paused, row[5], row[6])
        load = by_name.get(name) or _load(row, depth, read.run)
        out[name] = _eta(name, depth, weight, why, found.get(name, (None, 0.0)), read.mu, load)
    return out

"""Where a job stands: its place in its lane and an estimate of its wait until a claim.

``eta.lua`` reads, in one pure step, the job's rank in its lane, every lane with pending work
(depth, weight, ceiling, rate, paused, cooling, measured claim rate) and the queue's measured
service rate (``served`` and ``rates``, kept by the claim: ``count_claims`` in _served.lua).
:func:`estimate` turns that into an :class:`Eta` with a fluid model of the ring: the lanes
share the service rate by weight, each capped by its rate budget and by its ceiling, a lane
that empties hands its share to the others unless it was served lately
(docs/guides/where-a-tenant-stands.md argues the model and states its measured error).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, NamedTuple

from echomq.engine.checks import text
from echomq.engine.policies import parse_rate

#: Seconds: the time constant of the claim rates the engine measures (``count_claims``,
#: _served.lua).
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
    None = none): ``rate_cap`` from its rate budget, ``ceiling_cap`` from its ceiling.
    ``keeps``: the claims/s it goes on taking once its backlog is served (its measured rate: a
    lane served lately is taken to go on being fed; 0: it leaves the ring), ``demand_cap``
    that demand in force."""

    lane: str
    left: float
    weight: int
    rate_cap: float | None = None
    ceiling_cap: float | None = None
    keeps: float = 0.0
    demand_cap: float | None = None

    @property
    def cap(self) -> float:
        caps = [c for c in (self.rate_cap, self.ceiling_cap, self.demand_cap) if c is not None]
        return min(caps) if caps else math.inf

    def served(self) -> LaneLoad | None:
        """The lane once its backlog is served: still taking what it keeps, or gone."""
        if self.keeps <= 0:
            return None
        return replace(self, left=math.inf, keeps=0.0, demand_cap=self.keeps)

    def bound(self, rate: float) -> Bound:
        """What holds the lane at ``rate``."""
        if self.rate_cap is not None and rate >= self.rate_cap * (1 - 1e-9):
            return "rate"
        if self.ceiling_cap is not None and rate >= self.ceiling_cap * (1 - 1e-9):
            return "ceiling"
        return "share"


def measured_rate(raw: Any, pending: int, last_ms: int, now_ms: int) -> float:
    """Claims per second now, from a rate the claim folded (``rate:at:since``, "" for none;
    ``count_claims`` in _served.lua) and the ``pending`` claims counted since ``last_ms``, when
    the counting began (spread evenly over the time since); while the measurement is younger
    than the time constant, scaled up for the time it has run. 0.0 for none."""
    value = "" if raw is None else text(raw)
    rate, since = 0.0, float(last_ms)
    if value:
        folded, at, began = (float(part) for part in value.split(":"))
        if now_ms - at < 60_000:  # else a spell a minute gone
            rate, since = folded * math.exp((at - now_ms) / (SERVED_TAU * 1000)), began
    span = (now_ms - last_ms) / 1000
    if pending:
        rate += (
            pending / span * -math.expm1(-span / SERVED_TAU) if span > 0 else pending / SERVED_TAU
        )
    if rate <= 0:
        return 0.0
    age = max((now_ms - since) / 1000, SERVED_WARMUP)
    return rate / -math.expm1(-age / SERVED_TAU)


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


def _run(
    loads: Sequence[LaneLoad], mu: float, until: int | None
) -> tuple[list[float | None], list[float]]:
    """The fluid model: phase by phase, the lanes share ``mu`` (:func:`shares`); at the end of
    a phase the next lane's backlog is served, and it leaves (or keeps taking its arrivals,
    :meth:`LaneLoad.served`). Each lane's seconds until its ``left`` is served (None: never at
    a finite rate) and its rate in the first phase; ``until``: stop once that lane is served."""
    live = list(loads)
    first = shares(live, mu)
    done: list[float | None] = [0.0 if load.left <= 0 else None for load in loads]
    index = [i for i, load in enumerate(loads) if load.left > 0]
    live = [loads[i] for i in index]
    left = [load.left for load in live]
    elapsed = 0.0
    for phase in range(MAX_PHASES + 1):
        if until is not None and done[until] is not None:
            break
        rates = shares(live, mu)
        due = {n for n, r in enumerate(rates) if r > 0 and math.isfinite(left[n])}
        if not due:
            break
        step = min(left[n] / rates[n] for n in due)
        if phase == MAX_PHASES or not math.isfinite(step):
            # Out of phases: the rest at the rates of this one.
            for n in due:
                if math.isfinite(rates[n]) and done[index[n]] is None:
                    done[index[n]] = elapsed + left[n] / rates[n]
            break
        elapsed += step
        keep: list[int] = []
        for n in range(len(live)):
            if n in due:
                left[n] -= rates[n] * step if math.isfinite(rates[n]) else left[n]
            if left[n] > 1e-9:
                keep.append(n)
                continue
            if done[index[n]] is None:
                done[index[n]] = elapsed if math.isfinite(rates[n]) else None
            after = live[n].served()
            if after is not None and index[n] != until:
                live[n], left[n] = after, math.inf
                keep.append(n)
        index = [index[n] for n in keep]
        live = [live[n] for n in keep]
        left = [left[n] for n in keep]
    return done, first


def drain(loads: Sequence[LaneLoad], mu: float, target: int) -> tuple[float | None, float]:
    """Seconds until lane ``loads[target]`` has served its ``left`` and its rate in the first
    phase (:func:`_run`)."""
    done, first = _run(loads, mu, target)
    return done[target], first[target]


def drain_all(loads: Sequence[LaneLoad], mu: float) -> list[tuple[float | None, float]]:
    """:func:`drain` for every lane at once, in one run of the model."""
    done, first = _run(loads, mu, None)
    return list(zip(done, first, strict=True))


class _Row(NamedTuple):
    """One lane of ``eta.lua``'s answer, decoded."""

    lane: str
    depth: int
    weight: int
    limit: int
    leased: int
    rate_cap: float | None
    paused: bool
    cooling: bool
    measured: float

    @property
    def serving(self) -> bool:
        """On the ring or back on it by itself (a spent rate budget): it takes a share."""
        return not (self.paused or self.cooling)

    def load(self, left: int, run: float | None) -> LaneLoad:
        """The lane as the model sees it, ``left`` jobs to serve; ``run`` the mean run time."""
        # A lane served lately keeps its pace once its backlog is served (a steady flood:
        # its arrivals go on); a lane with no measured claims leaves the ring when served.
        keeps = self.measured
        ceiling = None
        if self.limit and self.depth and self.leased >= self.limit - 1 and self.measured > 0:
            # At (or a settle from) its ceiling with work waiting: what it was served is what
            # its ceiling lets through, the gap between a settle and its next claim included.
            ceiling = self.measured
        elif self.limit and run:
            ceiling = self.limit / run
        return LaneLoad(
            self.lane,
            left,
            self.weight,
            rate_cap=self.rate_cap,
            ceiling_cap=ceiling,
            keeps=keeps,
        )


@dataclass(frozen=True, slots=True)
class _Read:
    """``eta.lua``'s answer, decoded: the head and one row per lane (the job's lane first)."""

    lane: str
    ahead: int
    queue_paused: bool
    mu: float
    run: float | None
    rows: list[_Row]


def _read(reply: list[Any]) -> _Read:
    queue_rate, pending, now, leased = reply[3], int(reply[4]), int(reply[5]), int(reply[6])
    # The queue's record's `at` is when the counts since the last fold began.
    last = int(float(text(queue_rate).split(":")[1])) if queue_rate not in (None, b"", "") else now
    mu = measured_rate(queue_rate, pending, last, now)
    rows = []
    for i in range(7, len(reply), 10):
        name, depth, weight, limit, leased_here, raw_rate, paused, cool, measured, counted = reply[
            i : i + 10
        ]
        rate = parse_rate(raw_rate)
        rows.append(
            _Row(
                text(name),
                int(depth),
                int(weight),
                int(limit),
                int(leased_here),
                None if rate is None else rate.max / rate.window,
                bool(int(paused)),
                int(cool) > 0,
                measured_rate(measured, int(counted), last, now),
            )
        )
    # Little's law over the queue: leased jobs = claims/s x mean run time.
    run = leased / mu if mu > 0 and leased > 0 else None
    return _Read(text(reply[0]), int(reply[1]), bool(int(reply[2])), mu, run, rows)


def _eta(
    row: _Row,
    ahead: int,
    why: Bound | None,
    found: tuple[float | None, float],
    mu: float,
    load: LaneLoad,
) -> Eta:
    turns = ahead // max(row.weight, 1) + 1
    if why is not None:
        return Eta(row.lane, ahead, turns, None, None, why, mu)
    seconds, rate = found
    if seconds is None or not math.isfinite(rate):
        return Eta(row.lane, ahead, turns, None if ahead else 0.0, None, "idle", mu)
    return Eta(row.lane, ahead, turns, seconds, rate, load.bound(rate), mu)


def _why(queue_paused: bool, row: _Row) -> Bound | None:
    if queue_paused or row.paused:
        return "paused"
    return "cooling" if row.cooling else None


def estimate(reply: list[Any]) -> Eta:
    """``eta.lua``'s answer for one job or lane (not nil) as an :class:`Eta`."""
    read = _read(reply)
    me = read.rows[0]  # the job's lane; the others off the ring take no share
    loads = [me.load(read.ahead, read.run)]
    loads += [r.load(r.depth, read.run) for r in read.rows[1:] if r.serving]
    why = _why(read.queue_paused, me)
    found = drain(loads, read.mu, 0) if why is None else (None, 0.0)
    return _eta(me, read.ahead, why, found, read.mu, loads[0])


def estimate_all(reply: list[Any]) -> dict[str, Eta]:
    """``eta.lua``'s answer for every lane (no job) as each lane's :class:`Eta` for a job
    enqueued on it now, from one run of the model."""
    read = _read(reply)
    serving = [r for r in read.rows if r.serving]
    loads = [r.load(r.depth, read.run) for r in serving]
    found = dict(zip((r.lane for r in serving), drain_all(loads, read.mu), strict=True))
    by_name = {load.lane: load for load in loads}
    out: dict[str, Eta] = {}
    for row in read.rows:
        load = by_name.get(row.lane) or row.load(row.depth, read.run)
        why = _why(read.queue_paused, row)
        out[row.lane] = _eta(row, row.depth, why, found.get(row.lane, (None, 0.0)), read.mu, load)
    return out

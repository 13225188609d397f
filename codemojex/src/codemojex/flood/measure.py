"""The flood's figures, computed from its trace with no I/O: guess latency per room (p50/p99),
Jain's fairness index over the backlogged lanes of ``cm``, and the notification send rate.

Jain's index of shares x₁…xₙ is (Σx)² / (n·Σx²): 1 when every lane got the same share, 1/n
when one lane got everything. The flood computes it per window of ``window`` seconds over the
lanes of ``cm`` (players) that were *backlogged for the whole window* — a guess enqueued and not
yet claimed at every instant of it — with xᵢ the claims lane i got in that window. Lanes with
nothing waiting are left out: they asked for nothing, so nothing can be unfair to them. So are
windows whose lanes got fewer claims than there are lanes: k claims among n > k lanes cannot
score above k/n however fairly they are shared.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

TELEGRAM_BUDGET: Final = 30.0
"""Telegram's overall send budget for one bot, messages per second."""


@dataclass(frozen=True, slots=True)
class GuessSample:
    """One submitted guess of ``player`` (its lane) in ``room``, timed in seconds since the
    start: ``submitted`` when submit was called, ``charged`` when it returned (charged and
    enqueued), ``claimed`` when a score consumer first took it, ``scored`` at its ``scored``
    event; the last two are ``None`` if their event never came (events are at most once)."""

    room: str
    player: str
    submitted: float
    charged: float
    claimed: float | None
    scored: float | None

    @property
    def latency(self) -> float | None:
        """Submit → scored, in seconds: the guess latency the report is about."""
        return None if self.scored is None else self.scored - self.submitted

    @property
    def queued(self) -> float | None:
        """Charged → scored: the part spent in the queue and the score worker."""
        return None if self.scored is None else self.scored - self.charged

    @property
    def enqueued(self) -> float:
        """When it joined its lane (no later than its claim: submit returns after the enqueue)."""
        return self.charged if self.claimed is None else min(self.charged, self.claimed)


@dataclass(frozen=True, slots=True)
class RoomLatency:
    """Latency figures of one room's scored guesses, in seconds: submit → scored p50/p99/max,
    and the p99 of each part — the charge (submit → charged, the store's write) and the queue
    (charged → scored, the lanes and the score worker)."""

    room: str
    is_loud: bool
    guesses: int
    p50: float
    p99: float
    max: float
    charge_p99: float
    queue_p99: float


@dataclass(frozen=True, slots=True)
class Fairness:
    """Jain's index per window over backlogged lanes: the mean (weighted by guesses scored in
    the window), the lowest, and how many windows had at least two backlogged lanes."""

    mean: float
    lowest: float
    windows: int
    window: float


@dataclass(frozen=True, slots=True)
class SendRate:
    """Notifications delivered per ``bin`` seconds (``per_bin``), the peak bin and the mean over
    the bins from the first send to the last."""

    bin: float
    per_bin: tuple[int, ...]
    peak: float
    mean: float


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q ≤ 100) of ``values``; ``nan`` when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def jain(shares: Sequence[float]) -> float:
    """Jain's fairness index of ``shares`` (1.0 for an empty or all-zero list)."""
    total = sum(shares)
    squares = sum(x * x for x in shares)
    if not shares or squares == 0:
        return 1.0
    return total * total / (len(shares) * squares)


def room_latencies(samples: Iterable[GuessSample], loud: str) -> tuple[RoomLatency, ...]:
    """Per room figures of the scored guesses, the ``loud`` room first, then by name."""
    by_room: dict[str, list[GuessSample]] = defaultdict(list)
    for sample in samples:
        if sample.scored is not None:
            by_room[sample.room].append(sample)
    figures = []
    for room in sorted(by_room, key=lambda room: (room != loud, room)):
        latencies = [s.scored - s.submitted for s in by_room[room] if s.scored is not None]
        figures.append(
            RoomLatency(
                room,
                room == loud,
                len(latencies),
                percentile(latencies, 50),
                percentile(latencies, 99),
                max(latencies),
                percentile([s.charged - s.submitted for s in by_room[room]], 99),
                percentile([s.scored - s.charged for s in by_room[room] if s.scored], 99),
            )
        )
    return tuple(figures)


def pooled_p99(samples: Iterable[GuessSample], rooms: Iterable[str]) -> float:
    """The p99 of submit → scored over every scored guess of ``rooms`` together."""
    wanted = set(rooms)
    return percentile(
        [s.latency for s in samples if s.room in wanted and s.latency is not None], 99
    )


def _waiting_steps(samples: Iterable[GuessSample]) -> dict[str, list[tuple[float, int]]]:
    """Each lane's waiting-count changes in time order: +1 when enqueued, −1 when claimed."""
    steps: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for sample in samples:
        steps[sample.player].append((sample.enqueued, +1))
        if sample.claimed is not None:
            steps[sample.player].append((sample.claimed, -1))
    for changes in steps.values():
        # At one instant a claim leaves before an enqueue arrives: never overstate a backlog.
        changes.sort(key=lambda change: (change[0], change[1]))
    return steps


def _backlogged_throughout(changes: list[tuple[float, int]], start: float, end: float) -> bool:
    """Whether the lane had a guess waiting at every instant of [start, end)."""
    waiting = sum(step for at, step in changes if at <= start)
    if waiting <= 0:
        return False
    for at, step in changes:
        if start < at < end:
            waiting += step
            if waiting <= 0:
                return False
    return True


def fairness(samples: Sequence[GuessSample], window: float = 1.0) -> Fairness:
    """Jain's index per ``window`` of the claims the lanes backlogged throughout it got (see
    the module); windows with fewer than two such lanes, or fewer claims than lanes, are left
    out."""
    if not window > 0:
        raise ValueError(f"window {window!r}: seconds > 0")
    claimed = [s.claimed for s in samples if s.claimed is not None]
    if not claimed:
        return Fairness(1.0, 1.0, 0, window)
    steps = _waiting_steps(samples)
    claims_in: dict[tuple[str, int], int] = defaultdict(int)
    for at, sample in ((s.claimed, s) for s in samples if s.claimed is not None):
        claims_in[(sample.player, int(at // window))] += 1
    weighted = weight = 0.0
    lowest = 1.0
    windows = 0
    first = min(s.enqueued for s in samples)
    for index in range(int(first // window), int(max(claimed) // window) + 1):
        start, end = index * window, (index + 1) * window
        lanes = [lane for lane, c in steps.items() if _backlogged_throughout(c, start, end)]
        shares = [claims_in[(lane, index)] for lane in lanes]
        if len(lanes) < 2 or sum(shares) < len(lanes):
            continue
        value = jain(shares)
        windows += 1
        lowest = min(lowest, value)
        weighted += value * sum(shares)
        weight += sum(shares)
    return Fairness(weighted / weight if weight else 1.0, lowest, windows, window)


def send_rate(sends: Sequence[float], bin: float = 1.0) -> SendRate:
    """Sends per ``bin`` seconds from the first send to the last (zeros when there are none)."""
    if not bin > 0:
        raise ValueError(f"bin {bin!r}: seconds > 0")
    if not sends:
        return SendRate(bin, (), 0.0, 0.0)
    first = int(min(sends) // bin)
    counts = [0] * (int(max(sends) // bin) - first + 1)
    for at in sends:
        counts[int(at // bin) - first] += 1
    return SendRate(bin, tuple(counts), max(counts) / bin, len(sends) / (len(counts) * bin))

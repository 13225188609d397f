"""How a sharded queue's queue-wide budget (its concurrency ceiling, or its rate's claims per
window) is split into per-shard quotas: weighted water-filling (docs/concepts/shards.md,
"Queue-wide gates across shards").

Pure: no I/O, no clock. The rebalancer tells :func:`water_fill` what each shard's rings hold
(its most urgent band with a serviceable lane, the active weight W_s of that band's ring), how
much of its quota it uses and whether its claims met the quota; it answers each shard's target
in whole units, and the remainders to carry to the next round, so that the rounding is exact
over time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from echomq.engine.shard_schedule import NO_BAND
from echomq.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class ShardDemand:
    """One shard as a round sees it: ``band`` (its most urgent band with a serviceable lane,
    ``NO_BAND`` when none), ``weight`` (W_s, the weights on that band's ring), ``use`` (leases
    held now, or claims in the last window) and ``met`` (its claims met its quota: it would use
    more)."""

    band: int
    weight: int
    use: int
    met: bool

    @property
    def cap(self) -> int | None:
        """The most this shard can use: its use while it did not meet its quota, unbounded
        (None) while it did and has a serviceable lane."""
        return None if self.met and self.weight > 0 else self.use


def water_fill(
    shards: Sequence[ShardDemand], budget: int, carry: Sequence[Fraction] = ()
) -> tuple[list[int], list[Fraction]]:
    """Each shard's target (whole units, summing to ``budget`` exactly) and the remainders to
    carry to the next round (each in (-1, 1)).

    The budget goes to the most urgent band's shards first, in proportion to W_s, each capped by
    :attr:`ShardDemand.cap` (a capped shard's spare goes to the others), then to the next band;
    what no shard can use is spread evenly over every shard (a shard whose lanes come back
    finds some quota at once). Each share is rounded with last round's remainder added, the
    units left over going to the largest remainders, so over rounds of the same demand every
    shard's total stays within one unit of its exact share."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise InvalidArgument("budget", budget, "must be an int >= 0")
    n = len(shards)
    if n == 0:
        return [], []
    carried = list(carry) if carry else [Fraction(0)] * n
    if len(carried) != n:
        raise InvalidArgument("carry", carry, f"must hold one remainder per shard ({n})")
    share = [Fraction(0)] * n
    left = Fraction(budget)
    for band in sorted({s.band for s in shards if s.band != NO_BAND}, reverse=True):
        members = [k for k, s in enumerate(shards) if s.band == band and s.weight > 0]
        left = _fill(shards, members, share, left)
    # Shards with no serviceable lane: what they hold in use (leases, claims in the window).
    for k, s in enumerate(shards):
        if s.weight == 0 and left > 0:
            give = min(left, Fraction(s.use))
            share[k], left = share[k] + give, left - give
    if left > 0:
        for k in range(n):
            share[k] += left / n
    return _round(share, carried, budget)


def _fill(
    shards: Sequence[ShardDemand], members: list[int], share: list[Fraction], left: Fraction
) -> Fraction:
    """Water-fill ``left`` over ``members`` in proportion to their weights, capped: a member
    whose proportional share passes its cap gets its cap and leaves the pool. Returns what is
    left (0 unless every member is capped)."""
    pool = list(members)
    while pool and left > 0:
        total = sum(shards[k].weight for k in pool)
        capped = [
            k
            for k in pool
            if (cap := shards[k].cap) is not None and left * shards[k].weight / total >= cap
        ]
        if not capped:
            for k in pool:
                share[k] += left * shards[k].weight / total
            return Fraction(0)
        for k in capped:
            cap = shards[k].cap
            assert cap is not None
            share[k] += cap
            left -= cap
            pool.remove(k)
    return left


def _round(
    share: list[Fraction], carried: list[Fraction], budget: int
) -> tuple[list[int], list[Fraction]]:
    """Whole units summing to ``budget``: each share plus its carried remainder, floored, the
    units left over to the largest remainders (ties to the lowest index)."""
    # A negative want (a shard that got a unit ahead of its share) gets 0 and keeps its debt.
    want = [s + c for s, c in zip(share, carried, strict=True)]
    units = [max(0, math.floor(w)) for w in want]
    order = sorted(range(len(want)), key=lambda k: (-(want[k] - units[k]), k))
    left = budget - sum(units)
    at = 0
    while left > 0:  # the largest remainders first, round after round
        units[order[at % len(order)]] += 1
        left, at = left - 1, at + 1
    back = list(reversed(order))
    at = 0
    while left < 0:  # debts made the floors pass the budget: the smallest remainders give back
        k = back[at % len(back)]
        if units[k] > 0:
            units[k] -= 1
            left += 1
        at += 1
    # A remainder past one unit (the floors passing the budget, or the leftover wrapping
    # round: neither seen in the property tests) is not carried: it would grow without bound.
    remainders = [w - u for w, u in zip(want, units, strict=True)]
    return units, [r if -1 < r < 1 else Fraction(0) for r in remainders]

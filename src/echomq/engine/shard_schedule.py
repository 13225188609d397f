"""The order one worker visits a sharded queue's shards in: stride scheduling over the shards'
active weights, so that the claims of all workers together match what one ring would give
(docs/concepts/shards.md, "Visiting the shards").

Pure: no I/O, no clock. The engine tells a ``ShardStride`` what each shard's claim (or a
periodic read) answered about that shard — the most urgent band with a serviceable lane and the
sum of the weights on that band's ring — and charges it the claims each visit leased; it answers
which shard to visit next. Each worker keeps its own: nothing is shared, nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from echomq.errors import InvalidArgument

#: The band of a shard with no serviceable lane (below every priority band, 0..9).
NO_BAND: Final = -1
#: The most shards a queue may have (wake connections and summary reads grow with it).
MAX_SHARDS: Final = 256


@dataclass(frozen=True, slots=True)
class ShardLoad:
    """What one shard answered about its rings: ``band``, its most urgent band with a
    serviceable lane (``NO_BAND`` when none), and ``weight``, the sum of the weights of that
    band's ring (every lane on it counted at its weight: its own, else the default)."""

    band: int
    weight: int

    def __post_init__(self) -> None:
        if isinstance(self.band, bool) or not isinstance(self.band, int):
            raise InvalidArgument("band", self.band, "must be an int")
        if not NO_BAND <= self.band <= 9:
            raise InvalidArgument("band", self.band, f"must be {NO_BAND} (none) to 9")
        if isinstance(self.weight, bool) or not isinstance(self.weight, int) or self.weight < 0:
            raise InvalidArgument("weight", self.weight, "must be an int >= 0")
        if (self.band == NO_BAND) != (self.weight == 0):
            raise InvalidArgument("weight", self.weight, "is 0 exactly when band is NO_BAND")

    @property
    def is_active(self) -> bool:
        """Whether the shard has a serviceable lane."""
        return self.weight > 0


IDLE: Final = ShardLoad(NO_BAND, 0)


def shard_load(counters: Any, dweight: Any) -> ShardLoad:
    """A shard's load from its ``ringweight`` counters (``own:<band>``, ``count:<band>``, as
    ``HGETALL`` answers: a dict, or a flat list) and its default lane weight (meta ``dweight``;
    None: 1)."""
    default = int(dweight) if dweight is not None else 1
    weights: dict[int, int] = {}
    pairs = (
        counters.items()
        if isinstance(counters, dict)
        else zip(counters[::2], counters[1::2], strict=True)
    )
    for name, value in pairs:
        kind, _, band = (name.decode() if isinstance(name, bytes) else str(name)).partition(":")
        weight = int(value) * (default if kind == "count" else 1)
        weights[int(band)] = weights.get(int(band), 0) + weight
    active = {band: weight for band, weight in weights.items() if weight > 0}
    if not active:
        return IDLE
    top = max(active)
    return ShardLoad(top, active[top])


class ShardStride:
    """Stride scheduling over ``shards`` shards, by their active weights.

    Each shard has a *pass*: the claims it leased to this worker divided by its weight. The
    next visit goes to the eligible shard (an active one in the most urgent band any shard has)
    with the lowest pass, so over a run each eligible shard gets claims in proportion to its
    weight, and inside it the ring shares them by lane weight: lane *i* gets ``w_i / W`` of the
    claims, as on one ring. A shard that becomes eligible (a lane joined its idle ring, or its
    band became the most urgent) starts at the lowest pass of those already eligible, never
    below: idleness earns no credit, so a shard coming back cannot take a burst of visits that
    would starve the lanes of the shards that stayed busy. It keeps a debt it left with (at
    most one visit's claims), so leaving and rejoining gains nothing either.

    Between equal passes the shard served longest ago goes first, as a ring puts the lane it
    just served behind the others (a shard whose lane was served in a more urgent band does not
    go again before one that waited below it); between shards never served, ``offset`` rotates
    the tie-break (the shard after ``offset`` first), so workers started together do not visit
    the shards in the same order.
    """

    def __init__(self, shards: int, *, offset: int = 0) -> None:
        if isinstance(shards, bool) or not isinstance(shards, int):
            raise InvalidArgument("shards", shards, "must be an int")
        if not 1 <= shards <= MAX_SHARDS:
            raise InvalidArgument("shards", shards, f"must be 1 to {MAX_SHARDS}")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InvalidArgument("offset", offset, "must be an int")
        self.shards = shards
        self._offset = offset % shards
        self._loads: list[ShardLoad] = [IDLE] * shards
        self._passes: list[float] = [0.0] * shards
        self._eligible: frozenset[int] = frozenset()
        self._served: list[int] = [0] * shards  # the turn of each shard's last claims
        self._turn = 0
        # The lowest pass among the eligible shards at the last pick: never goes down.
        self._clock = 0.0

    def observe(self, shard: int, load: ShardLoad) -> None:
        """Take what ``shard`` answered about its rings (a claim's reply or a periodic read)."""
        self._check(shard)
        self._loads[shard] = load

    def load(self, shard: int) -> ShardLoad:
        """What this worker last heard from ``shard``."""
        self._check(shard)
        return self._loads[shard]

    def eligible(self) -> frozenset[int]:
        """The shards a visit may go to now: active, in the most urgent band heard of."""
        top = max(load.band for load in self._loads)
        if top == NO_BAND:
            return frozenset()
        return frozenset(s for s, load in enumerate(self._loads) if load.band == top)

    def pick(self) -> int | None:
        """The shard to visit next, or None when no shard is known to have work (park)."""
        eligible = self.eligible()
        if not eligible:
            self._eligible = eligible
            return None
        staying = eligible & self._eligible
        if staying != eligible:
            # Newcomers start at the lowest pass of those that stayed, or at the clock when
            # none stayed (the worker parked): no credit for idling.
            floor = min(self._passes[s] for s in staying) if staying else self._clock
            for s in eligible - staying:
                self._passes[s] = max(self._passes[s], floor)
        self._eligible = eligible
        self._clock = max(self._clock, min(self._passes[s] for s in eligible))
        return min(
            eligible,
            key=lambda s: (self._passes[s], self._served[s], (s - self._offset) % self.shards),
        )

    def charge(self, shard: int, claims: int) -> None:
        """Count ``claims`` jobs leased by a visit to ``shard`` (0 for an empty visit), at the
        weight it was picked by: charge a reply's claims before observing its load."""
        self._check(shard)
        if isinstance(claims, bool) or not isinstance(claims, int) or claims < 0:
            raise InvalidArgument("claims", claims, "must be an int >= 0")
        weight = self._loads[shard].weight
        if claims and weight:
            self._passes[shard] += claims / weight
        if claims:
            self._turn += 1
            self._served[shard] = self._turn

    def _check(self, shard: int) -> None:
        if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < self.shards:
            raise InvalidArgument("shard", shard, f"must be an int from 0 to {self.shards - 1}")

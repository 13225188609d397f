"""A pure model of a sharded queue's claims (docs/concepts/shards.md): each shard's ring served
as claim.lua serves it (weights as consecutive claims per visit, a batch walking the ring), and
workers that choose a shard per claim with a picker (echomq.engine.shard_schedule's stride, or
the naive schemes it is measured against). No server: the claims are counted, not leased."""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from echomq.engine.shard_schedule import IDLE, ShardLoad, ShardStride

#: A lane's depth when it is backlogged for the whole run.
FLOOD = 10**12


@dataclass
class ShardRing:
    """One shard's default band: its ring, each lane's weight and depth, and the turn.

    ``claim(want)`` is claim.lua's walk without gates: the head lane gives what is left of its
    turn (its weight less the claims it had this visit; everything, when it is alone on the
    ring), then the ring rotates; a lane that runs dry leaves the ring."""

    weights: dict[str, int]
    depth: dict[str, int] = field(default_factory=dict)
    ring: deque[str] = field(default_factory=deque)
    turn: tuple[str, int] | None = None

    def push(self, lane: str, jobs: int) -> None:
        """Enqueue ``jobs`` jobs into ``lane``; a lane that was empty joins the ring's tail."""
        if self.depth.get(lane, 0) == 0:
            self.ring.append(lane)
        self.depth[lane] = self.depth.get(lane, 0) + jobs

    def drain(self, lane: str) -> None:
        """Empty ``lane`` (its jobs removed): it leaves the ring."""
        if self.depth.get(lane, 0):
            self.depth[lane] = 0
            self.ring.remove(lane)
            if self.turn and self.turn[0] == lane:
                self.turn = None

    def load(self) -> ShardLoad:
        """What the shard's claim answers about its ring: the band and the ring's weight."""
        weight = sum(self.weights[lane] for lane in self.ring)
        return ShardLoad(5, weight) if weight else IDLE

    def claim(self, want: int) -> list[str]:
        """Lease up to ``want`` jobs; the lane of each, in order."""
        out: list[str] = []
        while len(out) < want and self.ring:
            lane = self.ring[0]
            weight = self.weights[lane]
            take = min(want - len(out), self.depth[lane])
            served = self.turn[1] if self.turn and self.turn[0] == lane and weight > 1 else 0
            if take > 1 and len(self.ring) > 1:
                take = min(take, max(1, weight - served))
            out.extend([lane] * take)
            self.depth[lane] -= take
            if self.depth[lane] == 0:
                self.ring.popleft()
                self.turn = None
            elif weight > 1 and served + take < weight:
                self.turn = (lane, served + take)
            else:
                self.turn = None
                self.ring.rotate(-1)
        return out


class Picker(Protocol):
    def observe(self, shard: int, load: ShardLoad) -> None: ...
    def pick(self) -> int | None: ...
    def charge(self, shard: int, claims: int) -> None: ...


class NaiveStride:
    """Stride over the shards' weights without the stride's floor for newcomers: a shard keeps
    the low pass it had when it went idle, and catches up on coming back."""

    def __init__(self, shards: int, *, offset: int = 0) -> None:
        self.loads = [IDLE] * shards
        self.passes = [0.0] * shards
        self.offset = offset

    def observe(self, shard: int, load: ShardLoad) -> None:
        self.loads[shard] = load

    def pick(self) -> int | None:
        active = [s for s, load in enumerate(self.loads) if load.is_active]
        n = len(self.loads)
        key = lambda s: (self.passes[s], (s - self.offset) % n)  # noqa: E731
        return min(active, key=key) if active else None

    def charge(self, shard: int, claims: int) -> None:
        if self.loads[shard].weight:
            self.passes[shard] += claims / self.loads[shard].weight


class RoundRobinShards:
    """One visit per active shard in turn, whatever their weights."""

    def __init__(self, shards: int, *, offset: int = 0) -> None:
        self.loads = [IDLE] * shards
        self.next = offset % shards

    def observe(self, shard: int, load: ShardLoad) -> None:
        self.loads[shard] = load

    def pick(self) -> int | None:
        n = len(self.loads)
        for step in range(n):
            s = (self.next + step) % n
            if self.loads[s].is_active:
                self.next = (s + 1) % n
                return s
        return None

    def charge(self, shard: int, claims: int) -> None:
        pass


PickerFactory = Callable[..., Picker]


@dataclass
class Sharded:
    """A sharded queue and its workers: ``run(claims)`` lets randomly interleaved workers (any
    job durations) claim ``batch`` at a time until ``claims`` jobs are leased.

    A worker learns a shard's load from each reply of that shard (piggybacked on the claim) and
    reads every shard's every ``refresh`` of its own visits (the periodic read)."""

    shards: list[ShardRing]
    workers: int
    batch: int
    refresh: int
    rng: random.Random
    picker: PickerFactory = ShardStride
    pickers: list[Picker] = field(init=False)
    since: list[int] = field(init=False)
    wasted: int = 0  # visits that leased nothing (a stale load)

    def __post_init__(self) -> None:
        self.pickers = [self.picker(len(self.shards), offset=k) for k in range(self.workers)]
        self.since = [self.refresh] * self.workers

    def run(self, claims: int) -> Counter[str]:
        served: Counter[str] = Counter()
        total = 0
        while total < claims:
            k = self.rng.randrange(self.workers)
            picker = self.pickers[k]
            if self.since[k] >= self.refresh:
                for index, shard in enumerate(self.shards):
                    picker.observe(index, shard.load())
                self.since[k] = 0
            self.since[k] += 1
            s = picker.pick()
            if s is None:
                raise AssertionError("a backlogged queue left a worker with nothing to claim")
            lanes = self.shards[s].claim(min(self.batch, claims - total))
            picker.charge(s, len(lanes))
            picker.observe(s, self.shards[s].load())
            if not lanes:
                self.wasted += 1
            served.update(lanes)
            total += len(lanes)
        return served


def build(
    weights: Sequence[int], placement: Sequence[int], shards: int
) -> tuple[list[ShardRing], dict[str, int], dict[str, int]]:
    """Backlogged lanes ``l0``, ``l1``, … of ``weights``, lane i on shard ``placement[i]``."""
    rings = [ShardRing(weights={}) for _ in range(shards)]
    lane_weights: dict[str, int] = {}
    home: dict[str, int] = {}
    for i, (weight, shard) in enumerate(zip(weights, placement, strict=True)):
        lane = f"l{i}"
        lane_weights[lane], home[lane] = weight, shard
        rings[shard].weights[lane] = weight
        rings[shard].push(lane, FLOOD)
    return rings, lane_weights, home


def normalised_shares(served: Counter[str], weights: dict[str, int]) -> dict[str, float]:
    """Each lane's share of the claims over its weight's share (1.0 = exactly its weight)."""
    claims, total = sum(served.values()), sum(weights.values())
    return {lane: (served[lane] / claims) / (w / total) for lane, w in weights.items()}


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index of ``values``: 1.0 when all are equal, 1/n at worst."""
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def run_length(weights: Sequence[int], placement: Sequence[int], workers: int, batch: int) -> int:
    """Claims after which the stride's bound puts every lane within ±5% of its weight share:
    N = 20 W (1 + K b / W_min), W the lanes' weights, W_min the least shard's, K workers
    claiming b at a time (docs/concepts/shards.md, "The error bound")."""
    by_shard: Counter[int] = Counter()
    for weight, shard in zip(weights, placement, strict=True):
        by_shard[shard] += weight
    least = min(by_shard.values())
    return 20 * sum(weights) * (workers * batch + least) // least

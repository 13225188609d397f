"""The queue-wide smooth rate split into per-shard quotas (docs/concepts/shards.md, "Queue-wide
gates across shards"), held in a pure model: each shard a sliding log against its own quota, a
rebalancer moving quota between shards at any moment. With the rule — lower the donor by at most
its unused room, then raise the receiver by what was freed — no window of T, wherever it
starts, holds more than M claims over all shards. Moving quota without the room check
overshoots, so the check can fail."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

WINDOW = 100  # ms
BUDGET = 6  # claims per window, the whole queue's


@dataclass
class ShardLog:
    """One shard's smooth rate: its quota and its claims' times (ms)."""

    quota: int
    claims: list[int] = field(default_factory=list)

    def used(self, now: int) -> int:
        return sum(1 for t in self.claims if t > now - WINDOW)

    def room(self, now: int) -> int:
        return self.quota - self.used(now)

    def claim(self, now: int) -> bool:
        if self.room(now) < 1:
            return False
        self.claims.append(now)
        return True


def move(
    shards: list[ShardLog], donor: int, receiver: int, want: int, now: int, exact: bool
) -> None:
    """The rebalancer's move: the donor gives up to ``want`` (only its unused room when
    ``exact``), the receiver gets what was given."""
    room = shards[donor].room(now) if exact else shards[donor].quota
    given_up = max(0, min(want, room))
    shards[donor].quota -= given_up
    shards[receiver].quota += given_up


def worst_window(shards: list[ShardLog]) -> int:
    """The most claims, over all shards, in any window of WINDOW ms (one ending at each claim)."""
    every = sorted(t for shard in shards for t in shard.claims)
    return max((sum(1 for u in every if t - WINDOW < u <= t) for t in every), default=0)


#: ("claim", shard, ms waited before it, 0) or ("move", donor, receiver, quota wanted).
Step = tuple[str, int, int, int]
claim_steps = st.tuples(st.just("claim"), st.integers(0, 2), st.integers(0, 30), st.just(0))
move_steps = st.tuples(st.just("move"), st.integers(0, 2), st.integers(0, 2), st.integers(1, 4))
steps = st.lists(st.one_of(claim_steps, move_steps), min_size=1, max_size=80)


def run(plan: list[Step], exact: bool) -> int:
    shards = [ShardLog(2), ShardLog(2), ShardLog(2)]  # 6 = BUDGET, split evenly
    now = 0
    for step in plan:
        if step[0] == "claim":
            _, shard, wait, _ = step
            now += wait
            shards[shard].claim(now)
        else:
            _, donor, receiver, want = step
            if donor != receiver:
                move(shards, donor, receiver, want, now, exact)
        assert sum(shard.quota for shard in shards) == BUDGET
    return worst_window(shards)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_quota_moved_only_as_unused_room_never_overshoots(
    plan: list[Step],
) -> None:
    assert run(plan, exact=True) <= BUDGET


def test_quota_moved_past_the_room_overshoots() -> None:
    """The check bites: shard 0 spends its 2, gives both away at once, shard 1 spends 4."""
    plan: list[Step] = [
        ("claim", 0, 1, 0),
        ("claim", 0, 1, 0),
        ("move", 0, 1, 2),
        *[("claim", 1, 1, 0)] * 4,
        *[("claim", 2, 1, 0)] * 2,
    ]
    assert run(plan, exact=True) == BUDGET
    assert run(plan, exact=False) == BUDGET + 2

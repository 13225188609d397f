"""Weighted water-filling of a sharded queue's budget (echomq.engine.quotas): the targets never
sum past the budget nor go below 0, follow W_s within a unit when every shard is backlogged,
give a capped shard's spare to the others and round exactly over rounds. The rule that moves
quota toward the targets without overshoot is held by test_shard_quota_model.py."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from echomq.engine.quotas import ShardDemand, water_fill
from echomq.engine.shard_schedule import NO_BAND

demands = st.builds(
    ShardDemand,
    band=st.integers(NO_BAND, 9),
    weight=st.integers(0, 20),
    use=st.integers(0, 30),
    met=st.booleans(),
).map(
    lambda d: d if (d.band == NO_BAND) == (d.weight == 0) else ShardDemand(NO_BAND, 0, d.use, d.met)
)
budgets = st.integers(0, 200)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(demands, min_size=1, max_size=6), min_size=1, max_size=6), budgets)
def test_targets_sum_to_the_budget_and_never_go_below_zero(
    rounds: list[list[ShardDemand]], budget: int
) -> None:
    n = len(rounds[0])
    carry: list[Fraction] = []
    for shards in rounds:
        shards = (shards * n)[:n]  # the same shard count every round
        targets, carry = water_fill(shards, budget, carry)
        assert sum(targets) == budget
        assert all(t >= 0 for t in targets)
        assert all(-1 < c < 1 for c in carry)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 20), min_size=1, max_size=8), budgets, st.integers(1, 12))
def test_backlogged_shards_get_their_weights_share_within_one_unit(
    weights: list[int], budget: int, rounds: int
) -> None:
    shards = [ShardDemand(5, w, 0, True) for w in weights]
    total = sum(weights)
    got = [0] * len(weights)
    carry: list[Fraction] = []
    for r in range(1, rounds + 1):
        targets, carry = water_fill(shards, budget, carry)
        for k, t in enumerate(targets):
            assert abs(t - Fraction(budget * weights[k], total)) < 2  # one round: ±1 unit
            got[k] += t
        for k in range(len(weights)):  # over rounds: the sums stay within a unit (carried)
            assert abs(got[k] - Fraction(r * budget * weights[k], total)) < 1


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(1, 20), min_size=2, max_size=6),
    st.integers(0, 10),
    st.integers(20, 200),
)
def test_a_capped_shards_spare_goes_to_the_others(
    weights: list[int], use: int, budget: int
) -> None:
    # Shard 0 did not meet its quota: it is capped at its use; the others are backlogged.
    shards = [ShardDemand(5, weights[0], use, False)] + [
        ShardDemand(5, w, 0, True) for w in weights[1:]
    ]
    targets, _ = water_fill(shards, budget)
    fair = Fraction(budget * weights[0], sum(weights))
    assert targets[0] <= min(use, fair) + 1
    rest = sum(weights[1:])
    for k, w in enumerate(weights[1:], start=1):
        assert abs(targets[k] - (budget - min(Fraction(use), fair)) * w / rest) < 1


def test_the_most_urgent_band_is_served_first() -> None:
    shards = [
        ShardDemand(9, 1, 0, True),
        ShardDemand(5, 10, 0, True),
        ShardDemand(NO_BAND, 0, 2, False),
    ]
    assert water_fill(shards, 12)[0] == [12, 0, 0]


def test_an_idle_shard_keeps_what_it_uses_and_spare_is_spread() -> None:
    # Shard 0 idle with 3 leases; shard 1 capped at its use 4: 3 left over, one to each.
    shards = [
        ShardDemand(NO_BAND, 0, 3, False),
        ShardDemand(5, 2, 4, False),
        ShardDemand(NO_BAND, 0, 0, False),
    ]
    assert water_fill(shards, 10)[0] == [4, 5, 1]


def test_a_budget_smaller_than_the_shards_rotates_its_units() -> None:
    shards = [ShardDemand(5, 1, 0, True)] * 6
    got = [0] * 6
    carry: list[Fraction] = []
    for _ in range(6):
        targets, carry = water_fill(shards, 5, carry)
        assert sum(targets) == 5
        got = [g + t for g, t in zip(got, targets, strict=True)]
    assert got == [5] * 6

"""The ETA's fluid model held to its laws (pure maths, no server): water-filling shares the
service rate by weight and never past a cap, and the model's waits follow the queue's work."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from echomq.engine.eta import LaneLoad, drain, drain_all, shares

caps = st.one_of(st.none(), st.floats(0.5, 500.0))
loads = st.lists(
    st.builds(
        LaneLoad,
        lane=st.text(min_size=1, max_size=3),
        left=st.integers(0, 500).map(float),
        weight=st.integers(1, 10),
        rate_cap=caps,
        ceiling_cap=caps,
        keeps=st.sampled_from([0.0, 0.0, 5.0, 50.0]),
    ),
    min_size=1,
    max_size=8,
)
mus = st.floats(1.0, 2000.0)


@given(loads, mus)
def test_shares_spend_the_service_rate_by_weight_and_never_past_a_cap(
    lanes: list[LaneLoad], mu: float
) -> None:
    rates = shares(lanes, mu)
    assert all(0 <= r <= lane.cap * (1 + 1e-9) for r, lane in zip(rates, lanes, strict=True))
    capped_total = sum(lane.cap for lane in lanes)
    assert math.isclose(sum(rates), min(mu, capped_total), rel_tol=1e-9)
    # Lanes below their caps get the same rate per unit of weight, and none below it.
    free = [r / lane.weight for r, lane in zip(rates, lanes, strict=True) if r < lane.cap]
    if free:
        level = max(free)
        assert all(math.isclose(f, level, rel_tol=1e-9) for f in free)
        held = [r / lane.weight for r, lane in zip(rates, lanes, strict=True) if r >= lane.cap]
        assert all(h <= level * (1 + 1e-9) for h in held)


@given(loads, mus)
def test_one_run_for_every_lane_answers_what_one_run_per_lane_does(
    lanes: list[LaneLoad], mu: float
) -> None:
    every = drain_all(lanes, mu)
    for n in range(len(lanes)):
        seconds, rate = drain(lanes, mu, n)
        assert math.isclose(rate, every[n][1], rel_tol=1e-9)
        if seconds is None or every[n][0] is None:
            assert seconds == every[n][0]
        else:
            assert math.isclose(seconds, every[n][0], rel_tol=1e-6, abs_tol=1e-9)


@given(loads, mus, st.integers(1, 200))
def test_more_work_ahead_never_shortens_the_wait(
    lanes: list[LaneLoad], mu: float, more: int
) -> None:
    seconds, _ = drain(lanes, mu, 0)
    deeper = [LaneLoad(lanes[0].lane, lanes[0].left + more, lanes[0].weight,
                       lanes[0].rate_cap, lanes[0].ceiling_cap), *lanes[1:]]  # fmt: skip
    longer, _ = drain(deeper, mu, 0)
    if seconds is not None and longer is not None:
        assert longer >= seconds * (1 - 1e-9)
    # Served alone at a finite rate, the wait is the work over that rate.
    alone = LaneLoad("x", float(more), 1)
    assert drain([alone], mu, 0)[0] == more / mu

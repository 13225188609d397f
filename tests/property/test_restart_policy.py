"""Properties of the ``--processes`` restart policy: a child that had been working is replaced
at once whatever came before; children that die before they are ready wait a doubling delay,
never past the cap; one ready child forgives the slot's whole history."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echomq.errors import InvalidArgument
from echomq.tasks.restarts import RestartPolicy, Slot

policies = st.builds(
    lambda base, factor: RestartPolicy(base, base * factor),
    st.floats(min_value=0.001, max_value=60),
    st.floats(min_value=1, max_value=1000),
)
exits = st.lists(st.booleans(), max_size=200)  # each child: was it ready when it exited?


def replay(history: list[bool]) -> Slot:
    slot = Slot()
    for was_ready in history:
        slot = slot.exited(was_ready=was_ready)
    return slot


@given(policies, exits)
def test_a_child_killed_after_it_was_ready_is_replaced_at_once(
    policy: RestartPolicy, history: list[bool]
) -> None:
    slot = replay(history).exited(was_ready=True)
    assert slot == Slot()
    assert policy.delay(slot) == 0


@given(policies, exits)
def test_early_exits_in_a_row_wait_base_doubling_up_to_the_cap(
    policy: RestartPolicy, history: list[bool]
) -> None:
    slot = replay(history)
    last_ready = max((i for i, was_ready in enumerate(history) if was_ready), default=-1)
    in_a_row = len(history) - 1 - last_ready
    assert slot.early_exits == in_a_row
    delay = policy.delay(slot)
    if in_a_row == 0:
        assert delay == 0
    else:
        assert policy.base <= delay <= policy.cap
        assert math.isclose(delay, min(policy.cap, policy.base * 2 ** (in_a_row - 1)))


@given(policies, st.integers(min_value=1, max_value=10_000))
def test_the_delay_never_shrinks_while_children_keep_dying_early(
    policy: RestartPolicy, early_exits: int
) -> None:
    slot = Slot(early_exits)
    assert policy.delay(slot.exited(was_ready=False)) >= policy.delay(slot) > 0


def test_the_default_crash_loop_waits_half_a_second_doubling_to_thirty() -> None:
    policy = RestartPolicy()
    delays = [policy.delay(Slot(n)) for n in range(10)]
    assert delays == [0, 0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    assert policy.delay(Slot(10**9)) == 30  # no overflow however long the loop


@pytest.mark.parametrize(
    ("base", "cap", "argument"),
    [(0, 1, "base"), (-1, 1, "base"), (math.nan, 1, "base"), (1, 0.5, "cap"), (1, math.inf, "cap")],
)
def test_a_bad_policy_is_refused_by_its_argument(base: float, cap: float, argument: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        RestartPolicy(base, cap)
    assert refused.value.argument == argument

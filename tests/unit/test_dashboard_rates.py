"""The dashboard's rates: per-second differences of successive counts over a span of seconds."""

from __future__ import annotations

from typing import Any

from echomq.dashboard._app import Rates


def _snap(completed: int, failed: int = 0, pending: int = 0) -> dict[str, Any]:
    return {"name": "q", "counts": {"completed": completed, "failed": failed, "pending": pending}}


def test_one_sample_is_not_a_rate_yet() -> None:
    assert Rates().update(_snap(10), 100.0) == {"completed": None, "failed": None, "backlog": None}


def test_rates_are_differences_over_the_span() -> None:
    rates = Rates(span=5.0)
    rates.update(_snap(0, 0, 100), 0.0)
    assert rates.update(_snap(30, 2, 70), 1.0) == {
        "completed": 30.0,
        "failed": 2.0,
        "backlog": -30.0,
    }
    for second in range(2, 11):
        answer = rates.update(_snap(30 * second, 2, 100 - 30 * second), float(second))
    # Samples older than the span are dropped: the rate covers the last 5 seconds only.
    assert answer["completed"] == 30.0


def test_a_burst_at_a_window_edge_is_smoothed() -> None:
    rates = Rates(span=5.0)
    totals = [0, 30, 60, 90, 150, 180]  # 60 in one second: two windows' budget at an edge
    for second, total in enumerate(totals):
        answer = rates.update(_snap(total), float(second))
    assert answer["completed"] == 36.0


def test_counters_reset_by_obliterate_do_not_go_negative() -> None:
    rates = Rates()
    rates.update(_snap(500, 9), 0.0)
    answer = rates.update(_snap(0, 0), 1.0)
    assert (answer["completed"], answer["failed"]) == (0.0, 0.0)

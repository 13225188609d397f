"""The flood's pure parts: Jain's index, percentiles, the fairness windows, the send rate, the
seeded plan, and the refusals of bad options and arguments."""

from __future__ import annotations

import dataclasses
import math

import pytest

from codemojex.cli import main
from codemojex.flood import (
    SMALL,
    FloodOptions,
    GuessSample,
    fairness,
    jain,
    percentile,
    plan,
    send_rate,
)


def test_jain_is_one_for_equal_shares_and_one_over_n_for_a_monopoly() -> None:
    assert jain([3, 3, 3]) == 1.0
    assert jain([6, 0, 0]) == pytest.approx(1 / 3)
    assert jain([]) == 1.0


def test_percentile_is_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([7.0], 99) == 7.0
    assert math.isnan(percentile([], 99))


def _lane(player: str, claims: list[float]) -> list[GuessSample]:
    # Every guess enqueued at 0: the lane stays backlogged until its last claim.
    return [GuessSample("loud", player, 0.0, 0.0, at, at + 0.01) for at in claims]


def test_fairness_is_one_when_backlogged_lanes_alternate() -> None:
    samples = _lane("PLR-a", [0.05 + 0.2 * n for n in range(20)])
    samples += _lane("PLR-b", [0.15 + 0.2 * n for n in range(20)])
    result = fairness(samples, window=1.0)
    assert result.windows >= 3
    assert result.mean == pytest.approx(1.0)


def test_fairness_shows_a_lane_starved_while_it_waits() -> None:
    samples = _lane("PLR-a", [0.1 * n + 0.05 for n in range(40)])
    samples += _lane("PLR-b", [5.0])  # waits from 0 to 5 s without a claim
    result = fairness(samples, window=1.0)
    assert result.lowest == pytest.approx(0.5)


def test_lanes_with_nothing_waiting_are_left_out_of_fairness() -> None:
    samples = _lane("PLR-a", [0.5, 1.5, 2.5])
    samples.append(GuessSample("quiet-1", "PLR-q", 1.2, 1.2, 1.21, 1.3))
    assert fairness(samples).windows == 0


def test_windows_with_fewer_claims_than_lanes_are_left_out() -> None:
    # Three lanes wait throughout [0, 3); one claim a second cannot be shared three ways.
    samples = _lane("PLR-a", [0.5, 3.5]) + _lane("PLR-b", [1.5, 3.6]) + _lane("PLR-c", [2.5, 3.7])
    assert fairness(samples).windows == 0


def test_send_rate_bins_per_second_from_first_to_last() -> None:
    rate = send_rate([0.1, 0.2, 0.3, 2.5])
    assert rate.per_bin == (3, 0, 1)
    assert rate.peak == 3.0
    assert rate.mean == pytest.approx(4 / 3)
    assert send_rate([]).per_bin == ()


def test_the_same_seed_draws_the_same_plan() -> None:
    assert plan(SMALL) == plan(SMALL)
    assert plan(dataclasses.replace(SMALL, seed=1)) != plan(SMALL)


def test_only_the_finale_cracks_a_code_and_quiet_players_stop_in_time() -> None:
    drawn = plan(SMALL)
    for room in drawn.rooms:
        for member in room.players:
            assert room.cracking_guess not in member.guesses
            assert list(member.at) == sorted(member.at)
            assert all(0 <= at < SMALL.duration for at in member.at)
    assert len(drawn.loud.players) == SMALL.players
    members = SMALL.players + SMALL.watchers + SMALL.quiet_rooms * SMALL.quiet_players
    assert len(set(drawn.private_chats)) == members


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"players": 0}, "players 0: an integer >= 1"),
        ({"guesses": True}, "guesses True: an integer >= 1"),
        ({"quiet_rooms": 1.5}, "quiet_rooms 1.5: an integer >= 1"),
        ({"duration": 0}, "duration 0: seconds > 0"),
        ({"pace": "fast"}, "pace 'fast': seconds > 0"),
        ({"duration": 5.0, "flood_at": 5.0}, "flood_at 5.0: seconds, from 0 to below duration"),
    ],
)
def test_bad_options_are_refused_by_name(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FloodOptions(**change)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--players", "0"], "argument --players: 0 must be 1 or more"),
        (["--guesses", "many"], "argument --guesses: 'many' is not a whole number"),
        (["--duration", "abc"], "argument --duration: 'abc' is not a number of seconds"),
        (["--duration", "0"], "argument --duration: 0 s must be above 0 and below an hour"),
        (["--seed", "1.5"], "argument --seed: '1.5' is not a whole number"),
    ],
)
def test_bad_arguments_exit_2_with_the_reason(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["flood", *argv])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_the_report_says_why_notifications_still_wait() -> None:
    from codemojex.flood.report import waiting_note

    note = waiting_note(486)
    assert note.startswith("486 notifications still wait")
    assert "not lost" in note
    assert "20 a minute to one group" in note

"""Scoring: points by distance, the total, and the feedback squares."""

from __future__ import annotations

import pytest

from codemojex.domain import MAX_TOTAL, CodeError, Feedback, Score, score

SECRET = ("🍎", "🍌", "🍒", "🍇", "🐶", "🐱")


def test_the_secret_itself_scores_600_and_cracks_the_code() -> None:
    result = score(SECRET, SECRET)
    assert result.per_position == (100,) * 6
    assert result.total == MAX_TOTAL == 600
    assert result.cracked
    assert result.percent == 100
    assert result.render() == "🟩" * 6


def test_points_fall_by_20_per_position_of_distance() -> None:
    # 🐱 sits at 5 in the secret: guessed at 0..5 it is 5..0 away.
    for position in range(6):
        guess = ["🦊"] * 6
        guess[position] = "🐱"
        assert score(guess, SECRET).per_position[position] == 100 - 20 * (5 - position)


def test_positions_are_scored_independently() -> None:
    result = score(("🍎",) * 6, SECRET)
    assert result.per_position == (100, 80, 60, 40, 20, 0)
    assert result.total == 300
    assert result.feedback == (
        Feedback.EXACT,
        Feedback.ADJACENT,
        Feedback.NEAR,
        Feedback.NEAR,
        Feedback.FAR,
        Feedback.MAX,
    )
    assert result.render() == "🟩🟨🟧🟧🟥🟪"
    assert result.percent == 50
    assert not result.cracked


def test_a_symbol_not_in_the_secret_scores_0_and_reads_miss() -> None:
    result = score(("🦊", "🐸", "🐙", "🦋", "🌵", "🌻"), SECRET)
    assert result.per_position == (0,) * 6
    assert result.total == 0
    assert result.feedback == (Feedback.MISS,) * 6
    assert result.render() == "⬛" * 6


def test_reversed_secret_scores_by_mirror_distance() -> None:
    result = score(tuple(reversed(SECRET)), SECRET)
    assert result.per_position == (0, 40, 80, 80, 40, 0)
    assert result.total == 240
    assert result.percent == 40


def test_percent_is_rounded_total_over_6() -> None:
    assert Score((20, 0, 0, 0, 0, 0), 20, (Feedback.FAR,) + (Feedback.MISS,) * 5).percent == 3
    assert Score((40, 0, 0, 0, 0, 0), 40, (Feedback.NEAR,) + (Feedback.MISS,) * 5).percent == 7


def test_feedback_names_only_a_distance_class() -> None:
    assert [Feedback.of_distance(d) for d in (0, 1, 2, 3, 4, 5, None)] == [
        Feedback.EXACT,
        Feedback.ADJACENT,
        Feedback.NEAR,
        Feedback.NEAR,
        Feedback.FAR,
        Feedback.MAX,
        Feedback.MISS,
    ]
    assert {feedback.symbol for feedback in Feedback} == {"🟩", "🟨", "🟧", "🟥", "🟪", "⬛"}
    with pytest.raises(CodeError):
        Feedback.of_distance(6)


def test_codes_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(CodeError) as caught:
        score(SECRET[:5], SECRET)
    assert str(caught.value) == "invalid guess: has 5 symbols, need 6"
    with pytest.raises(CodeError) as caught:
        score(SECRET, (*SECRET, "🦊"))
    assert str(caught.value) == "invalid secret: has 7 symbols, need 6"
    assert caught.value.reason == "length"


def test_a_secret_that_repeats_a_symbol_is_refused() -> None:
    with pytest.raises(CodeError) as caught:
        score(SECRET, ("🍎",) * 6)
    assert caught.value.reason == "repeated"


def test_a_score_whose_fields_disagree_is_refused() -> None:
    with pytest.raises(CodeError):
        Score((100,) * 6, 500, (Feedback.EXACT,) * 6)
    with pytest.raises(CodeError):
        Score((100,) * 6, 600, (Feedback.EXACT,) * 5)


def test_the_legend_explains_every_square_once_from_the_feedback_classes() -> None:
    from codemojex.domain import legend

    lines = legend().splitlines()
    assert [line.split()[0] for line in lines] == [f.symbol for f in Feedback]
    assert lines[0] == "🟩 right emoji, right place"
    assert "not in the code" in lines[-1]

"""Properties of codemojex's pure rules: scoring bounds and purity, parsing round-trips on every
set, secrets drawn from the keyboard without repeats, and pool splits that pay out exactly."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex.domain import (
    CODE_LENGTH,
    MAX_TOTAL,
    SETS,
    EmojiSet,
    Feedback,
    GuessError,
    GuessProblem,
    draw_secret,
    parse_guess,
    score,
    split_pool,
)

keyboards = st.sampled_from(list(SETS.values()))
separators = st.sampled_from(["", " ", ", ", ",", "  ", "\t", "，"])


@st.composite
def keyboard_guess_secret(draw: st.DrawFn) -> tuple[EmojiSet, tuple[str, ...], tuple[str, ...]]:
    keyboard = draw(keyboards)
    symbols = st.sampled_from(keyboard.symbols)
    guess = tuple(draw(st.lists(symbols, min_size=CODE_LENGTH, max_size=CODE_LENGTH)))
    secret = tuple(draw(st.permutations(keyboard.symbols))[:CODE_LENGTH])
    return keyboard, guess, secret


@given(keyboard_guess_secret())
def test_a_guess_equal_to_the_secret_scores_600(
    case: tuple[EmojiSet, tuple[str, ...], tuple[str, ...]],
) -> None:
    _, _, secret = case
    result = score(secret, secret)
    assert result.total == MAX_TOTAL
    assert result.cracked


@given(keyboard_guess_secret())
def test_scores_stay_in_their_bounds(
    case: tuple[EmojiSet, tuple[str, ...], tuple[str, ...]],
) -> None:
    _, guess, secret = case
    result = score(guess, secret)
    assert len(result.per_position) == CODE_LENGTH
    assert all(points in {0, 20, 40, 60, 80, 100} for points in result.per_position)
    assert 0 <= result.total <= MAX_TOTAL
    assert result.total == sum(result.per_position)
    assert 0 <= result.percent <= 100
    assert result.cracked is (guess == secret)


@given(keyboard_guess_secret())
def test_scoring_is_pure(case: tuple[EmojiSet, tuple[str, ...], tuple[str, ...]]) -> None:
    _, guess, secret = case
    guess_list, secret_list = list(guess), list(secret)
    first = score(guess_list, secret_list)
    assert score(guess_list, secret_list) == first
    assert score(guess, secret) == first
    assert (guess_list, secret_list) == (list(guess), list(secret))


@given(keyboard_guess_secret())
def test_each_position_scores_by_its_own_distance_only(
    case: tuple[EmojiSet, tuple[str, ...], tuple[str, ...]],
) -> None:
    _, guess, secret = case
    result = score(guess, secret)
    for position, symbol in enumerate(guess):
        distance = abs(position - secret.index(symbol)) if symbol in secret else None
        points = 0 if distance is None else 100 - 20 * distance
        assert result.per_position[position] == points
        assert result.feedback[position] is Feedback.of_distance(distance)


@given(keyboard_guess_secret(), separators)
def test_any_six_keyboard_symbols_parse_back_to_themselves(
    case: tuple[EmojiSet, tuple[str, ...], tuple[str, ...]], separator: str
) -> None:
    keyboard, guess, _ = case
    assert parse_guess(separator.join(guess), keyboard, distinct=False) == guess
    assert parse_guess("/guess " + separator.join(guess), keyboard, distinct=False) == guess


@given(keyboard_guess_secret())
def test_a_new_guess_parses_exactly_when_its_emojis_are_distinct(
    case: tuple[EmojiSet, tuple[str, ...], tuple[str, ...]],
) -> None:
    keyboard, guess, _ = case
    if len(set(guess)) == CODE_LENGTH:
        assert parse_guess("".join(guess), keyboard) == guess
        return
    with pytest.raises(GuessError) as refused:
        parse_guess("".join(guess), keyboard)
    assert refused.value.reason is GuessProblem.REPEATED
    assert set(refused.value.unknown) == {s for s in guess if guess.count(s) > 1}


@given(keyboard_guess_secret(), st.data())
def test_parsing_ignores_missing_or_extra_variation_selectors(
    case: tuple[EmojiSet, tuple[str, ...], tuple[str, ...]], data: st.DataObject
) -> None:
    keyboard, guess, _ = case
    plain = "".join(guess).replace("\ufe0f", "")
    # U+FE0F dropped everywhere, then sprinkled after any code points hypothesis picks.
    extra = data.draw(st.lists(st.booleans(), min_size=len(plain), max_size=len(plain)))
    text = "".join(c + ("\ufe0f" if add else "") for c, add in zip(plain, extra, strict=True))
    assert parse_guess(plain, keyboard, distinct=False) == guess
    assert parse_guess(text, keyboard, distinct=False) == guess


@given(keyboards, st.integers(min_value=0, max_value=2**32))
def test_a_secret_never_repeats_and_uses_only_keyboard_symbols(
    keyboard: EmojiSet, seed: int
) -> None:
    secret = draw_secret(keyboard, random.Random(seed))
    assert len(secret) == CODE_LENGTH
    assert len(set(secret)) == CODE_LENGTH
    assert set(secret) <= set(keyboard.symbols)


player_ids = st.text(
    alphabet="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    min_size=11,
    max_size=11,
).map(lambda payload: "PLR" + payload)


@given(
    st.integers(min_value=0, max_value=10**12),
    st.lists(player_ids, min_size=1, max_size=50, unique=True),
)
def test_a_split_pays_the_whole_pool_within_one_unit(pool: int, winners: list[str]) -> None:
    shares = split_pool(pool, winners)
    assert set(shares) == set(winners)
    assert sum(shares.values()) == pool
    assert all(share >= 0 for share in shares.values())
    assert max(shares.values()) - min(shares.values()) <= 1
    # The larger shares go to the lowest ids.
    ordered = [shares[winner] for winner in sorted(winners)]
    assert ordered == sorted(ordered, reverse=True)


def test_every_pair_of_symbols_of_every_set_reads_back_when_written_together() -> None:
    # Exhaustive over adjacent pairs, where a greedy longest match could go wrong.
    for keyboard in SETS.values():
        for first in keyboard.symbols:
            for second in keyboard.symbols:
                guess = (first, second) * (CODE_LENGTH // 2)
                assert parse_guess("".join(guess), keyboard, distinct=False) == guess

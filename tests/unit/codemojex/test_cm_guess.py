"""Reading a guess text into keyboard symbols, and the exact refusals players see."""

from __future__ import annotations

import pytest

from codemojex.domain import (
    DEFAULT_SET,
    SETS,
    CodemojexError,
    GuessError,
    GuessProblem,
    parse_guess,
)

SIX = ("🍎", "🍌", "🍒", "🍇", "🐶", "🐱")
THUMBS_UP = "\U0001f44d"
THUMBS_UP_MEDIUM = "\U0001f44d\U0001f3fd"
WHITE_FLAG = "\U0001f3f3\ufe0f"
RAINBOW_FLAG = "\U0001f3f3\ufe0f\u200d\U0001f308"
HEART = "\u2764\ufe0f"
VICTORY = "\u270c\ufe0f"


def refusal(text: str) -> GuessError:
    with pytest.raises(GuessError) as caught:
        parse_guess(text, DEFAULT_SET)
    return caught.value


@pytest.mark.parametrize(
    "text",
    [
        "🍎🍌🍒🍇🐶🐱",
        "🍎 🍌 🍒 🍇 🐶 🐱",
        "🍎,🍌,🍒,🍇,🐶,🐱",
        "  🍎, 🍌 ,🍒\t🍇\n🐶🐱  ",
        "🍎，🍌、🍒🍇🐶🐱",
        "/guess 🍎🍌🍒🍇🐶🐱",
        "/guess🍎🍌🍒🍇🐶🐱",
        "/GUESS 🍎 🍌 🍒 🍇 🐶 🐱",
        "/guess@codemojex_bot 🍎🍌🍒🍇🐶🐱",
    ],
)
def test_six_symbols_are_read_with_or_without_separators_and_command(text: str) -> None:
    assert parse_guess(text, DEFAULT_SET) == SIX


def test_a_repeated_emoji_is_refused_naming_it() -> None:
    with pytest.raises(GuessError) as refused:
        parse_guess("🍒🍒🍎🍌🍒🍌", DEFAULT_SET)
    assert refused.value.reason is GuessProblem.REPEATED
    assert refused.value.unknown == ("🍒", "🍌")
    assert "distinct" in str(refused.value)


def test_a_guess_recorded_before_the_distinct_rule_still_reads() -> None:
    assert parse_guess("🍎🍎🍎🍎🍎🍎", DEFAULT_SET, distinct=False) == ("🍎",) * 6


def test_multi_code_point_symbols_are_single_symbols_by_longest_match() -> None:
    signs = SETS["signs"]
    text = THUMBS_UP_MEDIUM + THUMBS_UP + RAINBOW_FLAG + WHITE_FLAG + HEART + VICTORY
    assert parse_guess(text, signs) == (
        THUMBS_UP_MEDIUM,
        THUMBS_UP,
        RAINBOW_FLAG,
        WHITE_FLAG,
        HEART,
        VICTORY,
    )


def test_a_missing_or_extra_variation_selector_is_tolerated() -> None:
    signs = SETS["signs"]
    # ❤ without U+FE0F, 👍 with a stray one, 🏳‍🌈 without its inner U+FE0F, ✌ with two.
    text = "\u2764 \U0001f44d\ufe0f \U0001f3f3\u200d\U0001f308 \u270c\ufe0f\ufe0f 🏁 🏁"
    assert parse_guess(text, signs, distinct=False) == (
        HEART,
        THUMBS_UP,
        RAINBOW_FLAG,
        VICTORY,
        "🏁",
        "🏁",
    )


def test_symbols_are_returned_as_the_keyboard_spells_them() -> None:
    assert parse_guess("🍎🍌🍒🍇🐶\u2764", DEFAULT_SET)[-1] == HEART


def test_five_symbols_are_too_few() -> None:
    error = refusal("🍎🍌🍒🍇🐶")
    assert str(error) == "too few emojis: found 5, need 6"
    assert (error.reason, error.found, error.expected) == (GuessProblem.TOO_FEW, 5, 6)


def test_seven_symbols_are_too_many() -> None:
    error = refusal("/guess 🍎 🍌 🍒 🍇 🐶 🐱 🦊")
    assert str(error) == "too many emojis: found 7, need 6"
    assert (error.reason, error.found, error.expected) == (GuessProblem.TOO_MANY, 7, 6)


def test_an_emoji_not_on_the_keyboard_is_named() -> None:
    error = refusal("🍎🍌🚗🍇🐶🐱")
    assert str(error) == "not on the classic keyboard: 🚗"
    assert error.reason is GuessProblem.UNKNOWN_SYMBOL
    assert error.unknown == ("🚗",)
    assert error.found == 5


def test_every_unknown_symbol_is_named_once_as_typed_and_whole() -> None:
    astronaut = "\U0001f469\U0001f3fd\u200d\U0001f680"  # 👩🏽‍🚀: not on the classic keyboard
    error = refusal(f"🚗 🇫🇷 hello 🚗 {astronaut} 🍎")
    assert error.unknown == ("🚗", "🇫🇷", "hello", astronaut)
    assert str(error) == f"not on the classic keyboard: 🚗, 🇫🇷, hello, {astronaut}"


def test_unknown_symbols_are_reported_before_the_count() -> None:
    assert refusal("🚗").reason is GuessProblem.UNKNOWN_SYMBOL


@pytest.mark.parametrize("text", ["", "   ", "/guess", "/guess  , ,", "\ufe0f"])
def test_an_empty_guess_is_refused(text: str) -> None:
    error = refusal(text)
    assert str(error) == "empty guess: send 6 emojis from the classic keyboard"
    assert (error.reason, error.found) == (GuessProblem.EMPTY, 0)


def test_a_guess_error_is_a_value_error_under_the_package_root() -> None:
    error = refusal("")
    assert isinstance(error, CodemojexError)
    assert isinstance(error, ValueError)
    assert error.reason == "empty"

"""Emoji sets: the shipped keyboards, and the sets a keyboard refuses."""

from __future__ import annotations

import pytest

from codemojex.domain import CODE_LENGTH, DEFAULT_SET, SETS, EmojiSet, EmojiSetError, get_set

THUMBS_UP_MEDIUM = "\U0001f44d\U0001f3fd"  # 👍🏽
ASTRONAUT = "\U0001f9d1\u200d\U0001f680"  # 🧑‍🚀
RAINBOW_FLAG = "\U0001f3f3\ufe0f\u200d\U0001f308"  # 🏳️‍🌈
HEART = "\u2764\ufe0f"  # ❤️


def test_default_set_is_24_distinct_emojis() -> None:
    assert DEFAULT_SET is SETS["classic"]
    assert len(DEFAULT_SET.symbols) == 24
    assert len(set(DEFAULT_SET.symbols)) == 24


def test_every_shipped_set_has_24_distinct_symbols_and_is_registered_by_its_name() -> None:
    assert len(SETS) >= 3
    for name, emoji_set in SETS.items():
        assert emoji_set.name == name
        assert len(emoji_set.symbols) == 24
        assert len(set(emoji_set.symbols)) == 24


def test_shipped_sets_include_skin_tone_zwj_and_variation_selector_symbols() -> None:
    every = {symbol for emoji_set in SETS.values() for symbol in emoji_set.symbols}
    assert {THUMBS_UP_MEDIUM, ASTRONAUT, RAINBOW_FLAG, HEART} <= every


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        SETS["mine"] = DEFAULT_SET  # type: ignore[index]


def test_emoji_set_is_frozen_and_hashable() -> None:
    with pytest.raises(AttributeError):
        DEFAULT_SET.name = "other"  # type: ignore[misc]
    assert hash(EmojiSet("x", DEFAULT_SET.symbols)) == hash(EmojiSet("x", DEFAULT_SET.symbols))


def test_get_set_names_the_known_sets_when_refusing() -> None:
    assert get_set("food") is SETS["food"]
    with pytest.raises(EmojiSetError) as caught:
        get_set("cars")
    assert caught.value.reason == "unknown"
    assert str(caught.value) == (
        "emoji set 'cars': no such set (known: animals, classic, food, signs, space)"
    )


def test_a_set_with_fewer_symbols_than_a_secret_is_refused() -> None:
    with pytest.raises(EmojiSetError) as caught:
        EmojiSet("tiny", ("🍎", "🍌", "🍒", "🍇", "🐶"))
    assert caught.value.reason == "too_small"
    assert str(caught.value) == (
        f"emoji set 'tiny': has 5 symbols, a secret needs {CODE_LENGTH} distinct ones"
    )


def test_symbols_differing_only_by_variation_selector_are_duplicates() -> None:
    with pytest.raises(EmojiSetError) as caught:
        EmojiSet("twice", ("🍎", "🍌", "🍒", "🍇", "\u2764", HEART))
    assert caught.value.reason == "duplicate"


def test_a_symbol_holding_a_separator_is_refused() -> None:
    with pytest.raises(EmojiSetError) as caught:
        EmojiSet("spaced", ("🍎 🍌", "🍒", "🍇", "🐶", "🐱", "🦊"))
    assert caught.value.reason == "separator"


def test_an_empty_symbol_is_refused() -> None:
    with pytest.raises(EmojiSetError) as caught:
        EmojiSet("blank", ("\ufe0f", "🍒", "🍇", "🐶", "🐱", "🦊"))
    assert caught.value.reason == "empty_symbol"


def test_a_set_greedy_matching_could_misread_is_refused() -> None:
    # 🧑🚀 without a ZWJ is just 🧑 followed by 🚀: a guess "🧑 🚀" written without the space
    # would read back as the one symbol.
    with pytest.raises(EmojiSetError) as caught:
        EmojiSet("ambiguous", ("\U0001f9d1", "🚀", "\U0001f9d1🚀", "🍇", "🐶", "🐱"))
    assert caught.value.reason == "ambiguous"


def test_a_prefix_symbol_is_fine_when_the_rest_cannot_start_a_symbol() -> None:
    EmojiSet("thumbs", ("\U0001f44d", THUMBS_UP_MEDIUM, "🍒", "🍇", "🐶", "🐱"))


def test_match_takes_the_longest_symbol_and_spells_it_as_the_set_does() -> None:
    signs = SETS["signs"]
    assert signs.match("\U0001f44d\U0001f3fd!", 0) == (THUMBS_UP_MEDIUM, 2)
    assert signs.match("\U0001f44d!", 0) == ("\U0001f44d", 1)
    assert signs.match("\u2764", 0) == (HEART, 1)
    assert signs.match("x\U0001f3f3\u200d\U0001f308", 1) == (RAINBOW_FLAG, 4)
    assert signs.match("🍎", 0) is None

"""Drawing the secret: distinct keyboard symbols, from the generator the caller passes."""

from __future__ import annotations

import random
from collections import Counter

from codemojex.domain import CODE_LENGTH, DEFAULT_SET, SETS, draw_secret


def test_a_secret_is_six_distinct_keyboard_symbols() -> None:
    for emoji_set in SETS.values():
        secret = draw_secret(emoji_set, random.Random(7))
        assert len(secret) == CODE_LENGTH
        assert len(set(secret)) == CODE_LENGTH
        assert set(secret) <= set(emoji_set.symbols)


def test_the_same_seed_draws_the_same_secret() -> None:
    assert draw_secret(DEFAULT_SET, random.Random(42)) == draw_secret(
        DEFAULT_SET, random.Random(42)
    )


def test_a_system_random_generator_is_accepted() -> None:
    assert len(draw_secret(DEFAULT_SET, random.SystemRandom())) == CODE_LENGTH


def test_every_symbol_is_drawn_at_every_position_about_equally() -> None:
    rng = random.Random(2024)
    draws = 24_000
    firsts = Counter(draw_secret(DEFAULT_SET, rng)[0] for _ in range(draws))
    lasts = Counter(draw_secret(DEFAULT_SET, rng)[-1] for _ in range(draws))
    # Expected 1000 per symbol; 800..1200 is more than 6 standard deviations either side.
    for counts in (firsts, lasts):
        assert set(counts) == set(DEFAULT_SET.symbols)
        assert all(800 <= count <= 1200 for count in counts.values())

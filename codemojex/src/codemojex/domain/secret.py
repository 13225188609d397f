"""The secret code: :data:`CODE_LENGTH` distinct symbols drawn uniformly from a keyboard.

The caller owns the randomness: production passes ``random.SystemRandom()``, tests a seeded
``random.Random``; nothing here keeps a generator of its own.
"""

from __future__ import annotations

import random

from codemojex.domain.emoji import CODE_LENGTH, EmojiSet


def draw_secret(keyboard: EmojiSet, rng: random.Random) -> tuple[str, ...]:
    """Draw a secret: an ordered sample of distinct symbols, each ordering equally likely.

    ``keyboard`` always has at least :data:`CODE_LENGTH` distinct symbols (an :class:`EmojiSet`
    refuses fewer), so this cannot fail.
    """
    return tuple(rng.sample(keyboard.symbols, CODE_LENGTH))

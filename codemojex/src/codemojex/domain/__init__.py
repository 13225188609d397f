"""The pure rules of codemojex: keyboards, secrets, guesses, scoring and the economy's arithmetic.

No I/O, no echomq, no Telegram, no SQL: only the standard library, so every rule is testable and
deterministic. The rest of the application imports from here.
"""

from codemojex.domain.economy import (
    DAILY_CLIPS,
    DIAMONDS_PER_KEY,
    FREE_ROOM_FEE,
    PAID_ROOM_FEE,
    STARTING_CLIPS,
    Currency,
    Fee,
    allowance,
    diamonds_to_keys,
    room_fee,
    split_pool,
    unit,
)
from codemojex.domain.emoji import CODE_LENGTH, DEFAULT_SET, SETS, EmojiSet, get_set
from codemojex.domain.errors import (
    CodeError,
    CodemojexError,
    EconomyError,
    EmojiSetError,
    GuessError,
    GuessProblem,
)
from codemojex.domain.guess import parse_guess
from codemojex.domain.scoring import MAX_TOTAL, Feedback, Score, legend, score
from codemojex.domain.secret import draw_secret

__all__ = [
    "CODE_LENGTH",
    "DAILY_CLIPS",
    "DEFAULT_SET",
    "DIAMONDS_PER_KEY",
    "FREE_ROOM_FEE",
    "MAX_TOTAL",
    "PAID_ROOM_FEE",
    "SETS",
    "STARTING_CLIPS",
    "CodeError",
    "CodemojexError",
    "Currency",
    "EconomyError",
    "EmojiSet",
    "EmojiSetError",
    "Fee",
    "Feedback",
    "GuessError",
    "GuessProblem",
    "Score",
    "allowance",
    "diamonds_to_keys",
    "draw_secret",
    "get_set",
    "legend",
    "parse_guess",
    "room_fee",
    "score",
    "split_pool",
    "unit",
]

"""Scoring a guess against the secret, and the per-position feedback shown to players.

Pure and deterministic, so a redelivered guess scores the same: for guess position i, if that
symbol is in the secret at position j, d = |i − j| and it scores 100 − 20·d; otherwise 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from codemojex.domain.emoji import CODE_LENGTH
from codemojex.domain.errors import CodeError

POINTS_EXACT: Final = 100
"""Points for a symbol in its secret position."""

POINTS_PER_STEP: Final = 20
"""Points lost per position of distance from where the symbol sits in the secret."""

MAX_TOTAL: Final = POINTS_EXACT * CODE_LENGTH
"""600: the total that cracks the code."""


class Feedback(StrEnum):
    """A position's distance class (the original system's status words). Never names a symbol.

    ============  =========================  ======  ======
    class         the guess symbol is …      points  symbol
    ============  =========================  ======  ======
    ``EXACT``     in the secret, d = 0       100     🟩
    ``ADJACENT``  in the secret, d = 1       80      🟨
    ``NEAR``      in the secret, d = 2 or 3  60, 40  🟧
    ``FAR``       in the secret, d = 4       20      🟥
    ``MAX``       in the secret, d = 5       0       🟪
    ``MISS``      not in the secret          0       ⬛
    ============  =========================  ======  ======

    ``MAX`` and ``MISS`` both score 0; the class tells them apart, as the original did.
    """

    EXACT = "exact"
    ADJACENT = "adjacent"
    NEAR = "near"
    FAR = "far"
    MAX = "max"
    MISS = "miss"

    @classmethod
    def of_distance(cls, distance: int | None) -> Feedback:
        """The class of a position whose symbol sits ``distance`` away (``None``: absent)."""
        if distance is None:
            return cls.MISS
        if not 0 <= distance < CODE_LENGTH:
            raise CodeError(
                "distance", "out_of_range", f"{distance} is not in 0..{CODE_LENGTH - 1}"
            )
        return _BY_DISTANCE[distance]

    @property
    def symbol(self) -> str:
        """The square shown for this class."""
        return _SYMBOLS[self]


_BY_DISTANCE: Final = (
    Feedback.EXACT,
    Feedback.ADJACENT,
    Feedback.NEAR,
    Feedback.NEAR,
    Feedback.FAR,
    Feedback.MAX,
)
_SYMBOLS: Final = MappingProxyType(
    {
        Feedback.EXACT: "🟩",
        Feedback.ADJACENT: "🟨",
        Feedback.NEAR: "🟧",
        Feedback.FAR: "🟥",
        Feedback.MAX: "🟪",
        Feedback.MISS: "⬛",
    }
)


LEGEND: Final = (
    (Feedback.EXACT, "right emoji, right place", "right place"),
    (Feedback.ADJACENT, "in the code, 1 place off", "1 off"),
    (Feedback.NEAR, "2 or 3 places off", "2–3 off"),
    (Feedback.FAR, "4 places off", "4 off"),
    (Feedback.MAX, "5 places off (the far end)", "5 off"),
    (Feedback.MISS, "not in the code", "not in it"),
)
"""What each square means, for people (in full, and short), in the order of the table above."""


def legend(*, short: bool = False) -> str:
    """The squares explained, built from :class:`Feedback`: one per line
    (``🟩 right emoji, right place``…), or with ``short`` one line for the keyboard message
    (``🟩 right place · 🟨 1 off · …``). The one legend every message shows."""
    if short:
        return " · ".join(f"{feedback.symbol} {brief}" for feedback, _, brief in LEGEND)
    return "\n".join(f"{feedback.symbol} {meaning}" for feedback, meaning, _ in LEGEND)


@dataclass(frozen=True, slots=True)
class Score:
    """The score of one guess: points per position, their total, and each position's class.

    Rebuild one with :func:`score` from the stored guess and secret; the fields must agree
    (``total`` is the sum, one class per position) or :class:`CodeError` is raised.
    """

    per_position: tuple[int, ...]
    total: int
    feedback: tuple[Feedback, ...]

    def __post_init__(self) -> None:
        if self.total != sum(self.per_position):
            raise CodeError("score", "inconsistent", f"total {self.total} is not the sum")
        if len(self.feedback) != len(self.per_position):
            raise CodeError("score", "inconsistent", "one feedback class per position is needed")

    @property
    def percent(self) -> int:
        """``total`` as a whole percentage of 600: round(total / 6).

        Totals are multiples of 20, so total / 6 never ends in .5 and rounding is unambiguous.
        """
        return round(self.total * 100 / MAX_TOTAL)

    @property
    def cracked(self) -> bool:
        """Whether this guess is the secret (a perfect 600); it closes the game."""
        return self.total == MAX_TOTAL

    def render(self) -> str:
        """The feedback squares, one per position (e.g. ``🟩🟨⬛⬛🟧🟪``)."""
        return "".join(feedback.symbol for feedback in self.feedback)


def score(guess: Sequence[str], secret: Sequence[str]) -> Score:
    """Score ``guess`` against ``secret``; positions are independent (a symbol is never used up).

    Both are :data:`CODE_LENGTH` symbols and the secret's are distinct, else :class:`CodeError`.
    Neither argument is modified.
    """
    if len(guess) != CODE_LENGTH:
        raise CodeError("guess", "length", f"has {len(guess)} symbols, need {CODE_LENGTH}")
    if len(secret) != CODE_LENGTH:
        raise CodeError("secret", "length", f"has {len(secret)} symbols, need {CODE_LENGTH}")
    where = {symbol: position for position, symbol in enumerate(secret)}
    if len(where) != CODE_LENGTH:
        raise CodeError("secret", "repeated", "a secret's symbols must be distinct")
    points: list[int] = []
    feedback: list[Feedback] = []
    for position, symbol in enumerate(guess):
        found = where.get(symbol)
        distance = None if found is None else abs(position - found)
        points.append(0 if distance is None else POINTS_EXACT - POINTS_PER_STEP * distance)
        feedback.append(Feedback.of_distance(distance))
    return Score(tuple(points), sum(points), tuple(feedback))

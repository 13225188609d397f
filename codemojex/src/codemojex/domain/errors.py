"""The one exception tree of codemojex's game domain; every error carries structured fields.

    CodemojexError          root: ``reason`` (a machine-readable word) and the message
    ├── EmojiSetError       (also ValueError) an emoji set that cannot be a keyboard
    ├── GuessError          (also ValueError) a guess text that is not 6 keyboard symbols
    ├── CodeError           (also ValueError) a code of the wrong length, or a secret that repeats
    └── EconomyError        (also ValueError) a fee, amount, pool or winner list that is refused

Normal outcomes (a miss, a zero score, an empty pool) are return values, never exceptions.
"""

from __future__ import annotations

from enum import StrEnum


class CodemojexError(Exception):
    """Root of every error codemojex raises; ``reason`` is stable, the message is for people."""

    def __init__(self, message: str, *, reason: str) -> None:
        self.reason: str = reason
        super().__init__(message)


class EmojiSetError(CodemojexError, ValueError):
    """An emoji set was refused as a keyboard (``name`` is the set's name)."""

    def __init__(self, name: str, reason: str, detail: str) -> None:
        self.name = name
        super().__init__(f"emoji set {name!r}: {detail}", reason=reason)


class GuessProblem(StrEnum):
    """Why a guess text was refused (the ``reason`` of a :class:`GuessError`)."""

    EMPTY = "empty"
    TOO_FEW = "too_few"
    TOO_MANY = "too_many"
    UNKNOWN_SYMBOL = "unknown_symbol"
    REPEATED = "repeated"
    """An emoji appears twice: the secret is six distinct emojis, so a guess is too."""


class GuessError(CodemojexError, ValueError):
    """A guess text was refused before any charge.

    ``found`` is how many keyboard symbols were read, ``expected`` how many a guess needs,
    ``unknown`` the text not on the keyboard, as typed, or the repeated emojis (empty unless
    one of those is the problem).
    """

    reason: GuessProblem

    def __init__(
        self,
        problem: GuessProblem,
        message: str,
        *,
        found: int = 0,
        expected: int,
        unknown: tuple[str, ...] = (),
    ) -> None:
        self.found = found
        self.expected = expected
        self.unknown = unknown
        super().__init__(message, reason=problem)


class CodeError(CodemojexError, ValueError):
    """A code (a guess or a secret as symbols) that cannot be scored or drawn."""

    def __init__(self, argument: str, reason: str, detail: str) -> None:
        self.argument = argument
        super().__init__(f"invalid {argument}: {detail}", reason=reason)


class EconomyError(CodemojexError, ValueError):
    """An amount, fee, pool or winner list refused by the economy rules; nothing was computed."""

    def __init__(self, argument: str, value: object, reason: str, detail: str) -> None:
        self.argument = argument
        self.value = value
        super().__init__(f"invalid {argument} {value!r}: {detail}", reason=reason)

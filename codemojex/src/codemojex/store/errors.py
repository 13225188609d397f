"""The refusals of the system of record; each carries structured fields and changes nothing.

CodemojexError            (codemojex.domain.errors) root: ``reason`` and the message
├── InsufficientFunds     a debit past zero: ``player``, ``currency``, ``balance``, ``amount``
├── GameClosed            a charge into a game that is ``closed`` or ``expired``
├── NotFound              no such player, room, game or guess: ``kind``, ``id``
├── InvalidId             (also ValueError) an id that is not a branded id of its namespace
└── UnsupportedDatabase   (also ValueError) a URL that is neither SQLite nor PostgreSQL
"""

from __future__ import annotations

from codemojex.domain import CodemojexError, Currency


class InsufficientFunds(CodemojexError):
    """A debit would drive ``player``'s ``currency`` balance below zero; nothing was written."""

    def __init__(self, player: str, currency: Currency, balance: int, amount: int) -> None:
        self.player = player
        self.currency = currency
        self.balance = balance
        self.amount = amount
        super().__init__(
            f"not enough {currency.value}: the balance is {balance}, the charge is {amount}",
            reason="insufficient_funds",
        )


class GameClosed(CodemojexError):
    """A guess was refused because its game no longer takes guesses; nothing was charged.

    ``reason`` is ``closed`` (the game was closed) or ``expired`` (its deadline has passed).
    """

    def __init__(self, game: str, reason: str) -> None:
        self.game = game
        detail = "is closed" if reason == "closed" else "has passed its deadline"
        super().__init__(f"game {game} {detail}", reason=reason)


class NotFound(CodemojexError):
    """No ``kind`` (``player``, ``room``, ``game``, ``guess``) has the id ``id``."""

    def __init__(self, kind: str, id: str) -> None:
        self.kind = kind
        self.id = id
        super().__init__(f"no {kind} {id}", reason="not_found")


class InvalidId(CodemojexError, ValueError):
    """``argument`` is not a branded id of ``namespace``; refused before any SQL."""

    def __init__(self, argument: str, value: object, namespace: str, detail: str) -> None:
        self.argument = argument
        self.value = value
        self.namespace = namespace
        super().__init__(f"invalid {argument} {value!r}: {detail}", reason="invalid_id")


class UnsupportedDatabase(CodemojexError, ValueError):
    """The URL names a database other than SQLite or PostgreSQL."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        super().__init__(
            f"unsupported database {backend!r}: use sqlite+aiosqlite:// or postgresql+asyncpg://",
            reason="unsupported_database",
        )

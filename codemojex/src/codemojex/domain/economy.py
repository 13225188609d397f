"""The economy's arithmetic: currencies, guess fees, the starting grant, diamonds into keys, and
splitting a prize pool among tied winners. Balances and ledgers live in the store, not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from codemojex.domain.errors import EconomyError


class Currency(StrEnum):
    """The three balances a player holds; the values are the names stored and shown."""

    CLIPS = "clips"
    """Pay guesses in free rooms; no value; new players get a grant."""
    KEYS = "keys"
    """Pay guesses in paid rooms; bought, or converted from diamonds."""
    DIAMONDS = "diamonds"
    """Prizes; convertible to keys."""


@dataclass(frozen=True, slots=True)
class Fee:
    """What one guess costs: a positive ``amount`` of clips or keys (never diamonds)."""

    currency: Currency
    amount: int

    def __post_init__(self) -> None:
        if self.currency not in (Currency.CLIPS, Currency.KEYS):
            raise EconomyError("currency", self.currency, "fee_currency", "fees are clips or keys")
        if self.amount < 1:
            raise EconomyError("amount", self.amount, "not_positive", "a fee is at least 1")


FREE_ROOM_FEE: Final = Fee(Currency.CLIPS, 1)
"""A guess in a free room costs one clip."""

PAID_ROOM_FEE: Final = Fee(Currency.KEYS, 1)
"""A guess in a paid room costs one key (and feeds the room's prize pool)."""

STARTING_CLIPS: Final = 100
"""Clips granted to a new player, so free rooms are playable at once."""

DAILY_CLIPS: Final = STARTING_CLIPS
"""The daily allowance: once per UTC day, a player short of clips is topped back up to this."""

DIAMONDS_PER_KEY: Final = 10
"""Diamonds that convert into one key."""


def unit(amount: int, currency: Currency) -> str:
    """The currency's word for ``amount`` of it: ``clip`` for one, ``clips`` otherwise."""
    return currency.value[:-1] if amount == 1 else currency.value


def room_fee(*, is_paid: bool) -> Fee:
    """The default fee of a guess: keys in a paid room, clips in a free one."""
    return PAID_ROOM_FEE if is_paid else FREE_ROOM_FEE


def allowance(clips: int, *, fee: int, granted_today: bool) -> int:
    """The clips a player's daily allowance credits now: enough to bring ``clips`` back to
    :data:`DAILY_CLIPS` when they cannot pay a guess (``clips`` < ``fee``) and nothing was
    granted yet this UTC day; else 0. Clips win nothing, so the refill only keeps free rooms
    playable: at most one top-up a day, never above the allowance."""
    if clips < 0:
        raise EconomyError("clips", clips, "negative", "a balance is 0 or more")
    if fee < 1:
        raise EconomyError("fee", fee, "not_positive", "a fee is at least 1")
    if granted_today or clips >= fee:
        return 0
    return max(0, DAILY_CLIPS - clips)


def diamonds_to_keys(diamonds: int) -> tuple[int, int]:
    """Convert ``diamonds`` into ``(keys, remaining_diamonds)`` at 10 diamonds per key.

    The remainder (0..9) stays diamonds; a negative amount is an :class:`EconomyError`.
    """
    if diamonds < 0:
        raise EconomyError("diamonds", diamonds, "negative", "must be 0 or more")
    return divmod(diamonds, DIAMONDS_PER_KEY)


def split_pool(pool: int, winners: Sequence[str]) -> dict[str, int]:
    """Split ``pool`` evenly among the winners tied at the top score.

    Each winner gets ``pool // len(winners)``; the remainder ``pool % len(winners)`` (fewer units
    than winners) goes one unit each to the first winners in ascending order of their ids. Player
    ids are branded ids, whose order is mint order, so ties favour whoever joined first. The
    shares sum exactly to ``pool``, none is negative, and no two differ by more than 1; the result
    is keyed in ascending id order and does not depend on the order of ``winners``.
    (The original paid the remainder to no one; we pay it out so the pool always settles whole.)

    Refused with :class:`EconomyError`: a negative pool, no winners, a winner listed twice.
    """
    if pool < 0:
        raise EconomyError("pool", pool, "negative", "a prize pool is 0 or more")
    if not winners:
        raise EconomyError("winners", list(winners), "no_winners", "at least one winner is needed")
    ordered = sorted(winners)
    if len(set(ordered)) != len(ordered):
        raise EconomyError("winners", list(winners), "duplicate", "a winner is listed twice")
    share, remainder = divmod(pool, len(ordered))
    return {winner: share + (1 if rank < remainder else 0) for rank, winner in enumerate(ordered)}

"""The economy's arithmetic: fees, the grant, diamonds into keys, splitting a prize pool."""

from __future__ import annotations

import pytest

from codemojex.domain import (
    DIAMONDS_PER_KEY,
    FREE_ROOM_FEE,
    PAID_ROOM_FEE,
    STARTING_CLIPS,
    CodemojexError,
    Currency,
    EconomyError,
    Fee,
    diamonds_to_keys,
    room_fee,
    split_pool,
)


def test_currency_names_are_the_stored_words() -> None:
    assert [currency.value for currency in Currency] == ["clips", "keys", "diamonds"]


def test_a_free_room_charges_clips_and_a_paid_room_keys() -> None:
    assert room_fee(is_paid=False) == FREE_ROOM_FEE == Fee(Currency.CLIPS, 1)
    assert room_fee(is_paid=True) == PAID_ROOM_FEE == Fee(Currency.KEYS, 1)


def test_new_players_start_with_a_grant_of_clips() -> None:
    assert STARTING_CLIPS > 0


def test_a_fee_is_a_positive_amount_of_clips_or_keys() -> None:
    with pytest.raises(EconomyError) as caught:
        Fee(Currency.KEYS, 0)
    assert str(caught.value) == "invalid amount 0: a fee is at least 1"
    with pytest.raises(EconomyError) as caught:
        Fee(Currency.DIAMONDS, 1)
    assert caught.value.reason == "fee_currency"


def test_ten_diamonds_make_a_key_and_the_rest_stays() -> None:
    assert DIAMONDS_PER_KEY == 10
    assert diamonds_to_keys(0) == (0, 0)
    assert diamonds_to_keys(9) == (0, 9)
    assert diamonds_to_keys(10) == (1, 0)
    assert diamonds_to_keys(137) == (13, 7)


def test_negative_diamonds_are_refused() -> None:
    with pytest.raises(EconomyError) as caught:
        diamonds_to_keys(-1)
    assert str(caught.value) == "invalid diamonds -1: must be 0 or more"


def test_a_single_winner_takes_the_pool() -> None:
    assert split_pool(250, ["PLR0000000000b"]) == {"PLR0000000000b": 250}


def test_an_even_pool_splits_evenly() -> None:
    assert split_pool(90, ["PLR0000000000c", "PLR0000000000a", "PLR0000000000b"]) == {
        "PLR0000000000a": 30,
        "PLR0000000000b": 30,
        "PLR0000000000c": 30,
    }


def test_the_remainder_goes_one_unit_each_to_the_lowest_ids() -> None:
    shares = split_pool(
        11, ["PLR0000000000d", "PLR0000000000b", "PLR0000000000a", "PLR0000000000c"]
    )
    assert shares == {
        "PLR0000000000a": 3,
        "PLR0000000000b": 3,
        "PLR0000000000c": 3,
        "PLR0000000000d": 2,
    }
    assert list(shares) == sorted(shares)


def test_a_pool_smaller_than_the_winners_pays_the_earliest() -> None:
    assert split_pool(1, ["PLR0000000000b", "PLR0000000000a"]) == {
        "PLR0000000000a": 1,
        "PLR0000000000b": 0,
    }
    assert split_pool(0, ["PLR0000000000a"]) == {"PLR0000000000a": 0}


def test_the_split_does_not_depend_on_the_order_of_winners() -> None:
    winners = ["PLR0000000000c", "PLR0000000000a", "PLR0000000000b"]
    assert split_pool(100, winners) == split_pool(100, list(reversed(winners)))


def test_bad_pools_and_winner_lists_are_refused() -> None:
    with pytest.raises(EconomyError) as caught:
        split_pool(-5, ["PLR0000000000a"])
    assert str(caught.value) == "invalid pool -5: a prize pool is 0 or more"
    assert caught.value.reason == "negative"
    with pytest.raises(EconomyError) as caught:
        split_pool(10, [])
    assert str(caught.value) == "invalid winners []: at least one winner is needed"
    assert isinstance(caught.value, CodemojexError)
    with pytest.raises(EconomyError) as caught:
        split_pool(10, ["PLR0000000000a", "PLR0000000000a"])
    assert caught.value.reason == "duplicate"


def test_the_daily_allowance_refills_a_player_who_cannot_pay_once_a_day() -> None:
    from codemojex.domain import DAILY_CLIPS, allowance

    assert allowance(0, fee=1, granted_today=False) == DAILY_CLIPS
    assert allowance(0, fee=1, granted_today=True) == 0  # once per UTC day
    assert allowance(1, fee=1, granted_today=False) == 0  # can still pay: nothing yet
    with pytest.raises(EconomyError):
        allowance(-1, fee=1, granted_today=False)


def test_one_of_a_currency_is_singular() -> None:
    from codemojex.domain import unit

    assert [unit(n, Currency.CLIPS) for n in (0, 1, 2)] == ["clips", "clip", "clips"]
    assert unit(1, Currency.DIAMONDS) == "diamond"

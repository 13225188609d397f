"""Properties of branded ids: the encoding is a bijection that keeps order; minting is monotonic."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from echomq.engine import ids as _ids

numbers = st.integers(min_value=0, max_value=2**63 - 1)
namespaces = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=3, max_size=3)

MINTS = 100_000


@given(namespaces, numbers)
def test_encode_then_parse_round_trips_every_63_bit_number(namespace: str, n: int) -> None:
    encoded = _ids.encode(namespace, n)
    assert len(encoded.encode("ascii")) == 14
    assert _ids.is_valid(encoded)
    assert _ids.parse(encoded) == (namespace, n)


@given(numbers, numbers)
def test_byte_order_equals_numeric_order(a: int, b: int) -> None:
    ea = _ids.encode("JOB", a).encode()
    eb = _ids.encode("JOB", b).encode()
    assert (ea < eb) == (a < b)
    assert (ea == eb) == (a == b)


@given(st.text(min_size=11, max_size=11, alphabet=_ids.ALPHABET))
def test_any_base62_payload_is_valid_exactly_when_within_63_bits(payload: str) -> None:
    candidate = "JOB" + payload
    assert _ids.is_valid(candidate) == (payload <= "AzL8n0Y58m7")


@given(st.text(max_size=20))
def test_is_valid_agrees_with_validate_on_any_text(text: str) -> None:
    try:
        _ids.validate(text)
    except ValueError:
        assert not _ids.is_valid(text)
    else:
        assert _ids.is_valid(text)


def _assert_strictly_increasing_ids(minter: _ids.Minter, count: int) -> None:
    previous = ""
    seen: set[str] = set()
    for _ in range(count):
        minted = minter.mint("JOB")
        assert minted > previous
        seen.add(minted)
        previous = minted
    assert len(seen) == count


def test_100k_mints_on_the_wall_clock_are_unique_and_increasing() -> None:
    _assert_strictly_increasing_ids(_ids.Minter(node=3), MINTS)


def test_100k_mints_on_a_standing_clock_carry_the_sequence_into_the_timestamp() -> None:
    now = _ids.EPOCH_MS + 1_000
    minter = _ids.Minter(clock=lambda: now)
    _assert_strictly_increasing_ids(minter, MINTS)
    last = _ids.parse(minter.mint("JOB"))[1]
    # every 4096 mints in one standing millisecond borrow one ms from the future
    assert last >> 22 == 1_000 + MINTS // 4096


def test_100k_mints_on_a_clock_stepping_backwards_are_unique_and_increasing() -> None:
    start = _ids.EPOCH_MS + 10_000_000
    ticks = iter(range(MINTS + 1))
    minter = _ids.Minter(clock=lambda: start - next(ticks))
    _assert_strictly_increasing_ids(minter, MINTS)


@given(st.lists(st.integers(min_value=-5_000, max_value=5_000), min_size=1, max_size=50))
def test_mints_on_any_jittering_clock_are_unique_and_increasing(offsets: list[int]) -> None:
    base = _ids.EPOCH_MS + 1_000_000
    minter = _ids.Minter(
        node=1023, clock=itertools.cycle([base + offset for offset in offsets]).__next__
    )
    _assert_strictly_increasing_ids(minter, 2_000)

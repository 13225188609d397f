"""Branded ids: the spec's vectors, every refusal and its reason, and the Minter's contract."""

from __future__ import annotations

import threading

import pytest

from echomq.engine import ids as _ids
from echomq.errors import EchoMQError, InvalidArgument

USR_N = 274_557_032_793_636_864
USR_ID = "USR0KHTOWnGLuC"


def test_encode_matches_the_spec_vector() -> None:
    assert _ids.encode("USR", USR_N) == USR_ID


def test_parse_matches_the_spec_vector() -> None:
    assert _ids.parse("USR0NgWEfAEJfs") == ("USR", 320_636_799_581_945_856)


def test_unix_ms_is_the_timestamp_bits_plus_the_epoch() -> None:
    assert _ids.unix_ms(USR_ID) == (USR_N >> 22) + 1_704_067_200_000


def test_hash32_matches_the_spec_vector() -> None:
    assert _ids.hash32(USR_N) == 234_878_118


def test_largest_number_encodes_to_the_largest_valid_payload() -> None:
    assert _ids.encode("JOB", 2**63 - 1) == "JOBAzL8n0Y58m7"
    assert _ids.parse("JOBAzL8n0Y58m7") == ("JOB", 2**63 - 1)


def test_zero_encodes_as_all_zero_padding() -> None:
    assert _ids.encode("JOB", 0) == "JOB00000000000"
    assert _ids.parse("JOB00000000000") == ("JOB", 0)


@pytest.mark.parametrize("n", [0, 1, 61, 62, 3843, 3844, 62**5, 62**10, USR_N, 2**63 - 1])
def test_encode_then_parse_round_trips(n: int) -> None:
    encoded = _ids.encode("ORD", n)
    assert len(encoded) == 14
    assert encoded.isascii()
    assert _ids.parse(encoded) == ("ORD", n)
    assert _ids.is_valid(encoded)


def test_byte_order_equals_numeric_order_across_digit_boundaries() -> None:
    numbers = [0, 9, 10, 35, 36, 61, 62, 63, 3843, 3844, 62**10 - 1, 62**10, 2**63 - 1]
    encoded = [_ids.encode("JOB", n) for n in numbers]
    assert encoded == sorted(encoded)
    assert [e.encode() for e in encoded] == sorted(e.encode() for e in encoded)


def test_min_for_is_the_first_number_of_that_millisecond() -> None:
    ms = _ids.unix_ms(USR_ID)
    low = _ids.min_for(ms)
    assert low >> 22 == ms - _ids.EPOCH_MS
    assert low & ((1 << 22) - 1) == 0
    assert low <= USR_N < _ids.min_for(ms + 1)


def test_min_for_clamps_instants_before_the_epoch_to_zero() -> None:
    assert _ids.min_for(0) == 0


def test_min_for_refuses_instants_past_the_timestamp_range() -> None:
    with pytest.raises(InvalidArgument, match="41-bit"):
        _ids.min_for(_ids.EPOCH_MS + 2**41)


# --- refusals and their reasons ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("USR0KHTOWnGLu", "must be exactly 14 characters, got 13"),
        ("USR0KHTOWnGLuCC", "must be exactly 14 characters, got 15"),
        ("", "must be exactly 14 characters, got 0"),
        ("usr0KHTOWnGLuC", "namespace 'usr' must be 3 uppercase ASCII letters A-Z"),
        ("U1R0KHTOWnGLuC", "namespace 'U1R' must be 3 uppercase ASCII letters A-Z"),
        ("ÜSR0KHTOWnGLuC", "namespace 'ÜSR' must be 3 uppercase ASCII letters A-Z"),
        ("USR0KHTOW-GLuC", "character '-' at position 9 is not Base62 (0-9A-Za-z)"),
        ("USR0KHTOWnGLué", "character 'é' at position 13 is not Base62 (0-9A-Za-z)"),
        ("USR0KHTOWnGLu\n", "character '\\n' at position 13 is not Base62 (0-9A-Za-z)"),
        ("JOBAzL8n0Y58m8", "payload 'AzL8n0Y58m8' exceeds 2**63 - 1 (largest is 'AzL8n0Y58m7')"),
        ("JOBzzzzzzzzzzz", "payload 'zzzzzzzzzzz' exceeds 2**63 - 1 (largest is 'AzL8n0Y58m7')"),
        (b"USR0KHTOWnGLuC", "must be a str, got bytes"),
        (None, "must be a str, got NoneType"),
    ],
)
def test_malformed_ids_are_refused_with_their_reason(value: object, reason: str) -> None:
    assert not _ids.is_valid(value)
    with pytest.raises(InvalidArgument) as refused:
        _ids.validate(value)
    assert refused.value.argument == "id"
    assert refused.value.value == value
    assert refused.value.reason == reason
    with pytest.raises(InvalidArgument) as parsed:
        _ids.parse(value)  # type: ignore[arg-type]
    assert parsed.value.reason == reason


def test_validate_names_the_argument_it_was_given() -> None:
    with pytest.raises(InvalidArgument, match=r"^invalid job id 'nope': must be exactly 14"):
        _ids.validate("nope", argument="job id")


def test_validate_refuses_an_id_of_another_namespace() -> None:
    with pytest.raises(InvalidArgument) as refused:
        _ids.validate(USR_ID, namespace="JOB")
    assert refused.value.reason == "namespace 'USR' is not the required 'JOB'"


def test_validate_returns_a_valid_id_unchanged() -> None:
    assert _ids.validate(USR_ID) == USR_ID
    assert _ids.validate(USR_ID, namespace="USR") == USR_ID


def test_invalid_argument_is_an_echomq_error_and_a_value_error() -> None:
    with pytest.raises(InvalidArgument) as refused:
        _ids.parse("bad")
    assert isinstance(refused.value, EchoMQError)
    assert isinstance(refused.value, ValueError)


@pytest.mark.parametrize("namespace", ["us", "USER", "usr", "U$R", "", "ÄBC"])
def test_encode_refuses_a_bad_namespace(namespace: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        _ids.encode(namespace, 1)
    assert refused.value.argument == "namespace"
    assert refused.value.reason == "must be 3 uppercase ASCII letters A-Z"


@pytest.mark.parametrize("n", [-1, 2**63, True, 1.0])
def test_encode_refuses_numbers_outside_63_bits(n: object) -> None:
    with pytest.raises(InvalidArgument) as refused:
        _ids.encode("JOB", n)  # type: ignore[arg-type]
    assert refused.value.argument == "number"
    assert refused.value.reason == "must be an int in [0, 2**63 - 1]"


# --- Minter -----------------------------------------------------------------------------------


class SteppingClock:
    """A clock that answers a fixed sequence of Unix ms, then repeats its last value."""

    def __init__(self, *values: int) -> None:
        self.values = list(values)

    def __call__(self) -> int:
        return self.values.pop(0) if len(self.values) > 1 else self.values[0]


def test_minted_id_carries_the_clock_time_node_and_namespace() -> None:
    now = _ids.EPOCH_MS + 123_456
    minter = _ids.Minter(node=5, clock=SteppingClock(now))
    minted = minter.mint("JOB")
    namespace, n = _ids.parse(minted)
    assert namespace == "JOB"
    assert _ids.unix_ms(minted) == now
    assert (n >> 12) & 0x3FF == 5
    assert n & 0xFFF == 0


def test_mints_in_one_millisecond_increment_the_sequence() -> None:
    minter = _ids.Minter(clock=SteppingClock(_ids.EPOCH_MS + 7))
    numbers = [minter.next_number() for _ in range(3)]
    assert [n & 0xFFF for n in numbers] == [0, 1, 2]
    assert {n >> 22 for n in numbers} == {7}


def test_sequence_overflow_carries_into_the_timestamp() -> None:
    minter = _ids.Minter(clock=SteppingClock(_ids.EPOCH_MS + 7))
    numbers = [minter.next_number() for _ in range(4097)]
    assert numbers[4095] >> 22 == 7
    assert numbers[4095] & 0xFFF == 4095
    assert numbers[4096] >> 22 == 8
    assert numbers[4096] & 0xFFF == 0


def test_a_clock_stepping_back_never_repeats_a_number() -> None:
    minter = _ids.Minter(clock=SteppingClock(_ids.EPOCH_MS + 100, _ids.EPOCH_MS + 50))
    first = minter.next_number()
    second = minter.next_number()
    assert second == first + 1


def test_a_clock_moving_forward_resets_the_sequence() -> None:
    minter = _ids.Minter(
        clock=SteppingClock(_ids.EPOCH_MS + 1, _ids.EPOCH_MS + 1, _ids.EPOCH_MS + 9)
    )
    numbers = [minter.next_number() for _ in range(3)]
    assert [(n >> 22, n & 0xFFF) for n in numbers] == [(1, 0), (1, 1), (9, 0)]


def test_a_clock_before_the_epoch_still_mints_valid_ids() -> None:
    minter = _ids.Minter(clock=SteppingClock(0))
    assert [_ids.parse(minter.mint("JOB"))[1] for _ in range(2)] == [0, 1]


def test_default_minter_uses_the_wall_clock() -> None:
    import time

    before = time.time_ns() // 1_000_000
    minted = _ids.Minter().mint("JOB")
    after = time.time_ns() // 1_000_000
    assert before <= _ids.unix_ms(minted) <= after


@pytest.mark.parametrize("node", [-1, 1024, True])
def test_minter_refuses_a_node_outside_ten_bits(node: int) -> None:
    with pytest.raises(InvalidArgument) as refused:
        _ids.Minter(node=node)
    assert refused.value.argument == "node"
    assert refused.value.reason == "must be an int in [0, 1023]"


def test_mint_refuses_a_bad_namespace_without_spending_a_number() -> None:
    minter = _ids.Minter(clock=SteppingClock(_ids.EPOCH_MS))
    with pytest.raises(InvalidArgument):
        minter.mint("job")
    assert minter.next_number() == 0


def test_minter_refuses_a_clock_past_the_timestamp_range() -> None:
    minter = _ids.Minter(clock=SteppingClock(_ids.EPOCH_MS + 2**41))
    with pytest.raises(InvalidArgument, match="41-bit"):
        minter.next_number()


def test_minter_shared_by_threads_never_repeats_a_number() -> None:
    minter = _ids.Minter(clock=SteppingClock(_ids.EPOCH_MS + 1))
    results: list[list[int]] = [[] for _ in range(4)]

    def work(out: list[int]) -> None:
        out.extend(minter.next_number() for _ in range(5000))

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [n for out in results for n in out]
    assert len(set(every)) == len(every) == 20_000
    assert all(out == sorted(out) for out in results)


def test_validate_id_is_public_and_names_the_argument() -> None:
    import echomq.engine

    good = echomq.engine.Minter(1).mint("GAM")
    assert echomq.engine.validate_id(good, "GAM", "game") == good
    with pytest.raises(echomq.InvalidArgument, match="game"):
        echomq.engine.validate_id(good, "PLR", "game")

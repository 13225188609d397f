"""The keyspace: one slot per queue, names refused with their reason, and the slot function."""

from __future__ import annotations

import dataclasses

import pytest

from echomq.engine import ids as _ids
from echomq.engine import keys as _keys
from echomq.errors import InvalidArgument

JOB_ID = _ids.encode("JOB", 274_557_032_793_636_864)


def test_crc16_matches_the_xmodem_check_value() -> None:
    assert _keys.crc16(b"123456789") == 0x31C3
    assert _keys.crc16(b"") == 0


def test_slot_matches_the_cluster_vector() -> None:
    assert _keys.slot("123456789") == 12739
    assert _keys.slot(b"123456789") == 12739


def test_slot_hashes_only_the_hash_tag() -> None:
    assert _keys.slot("emq:{orders}:ring") == _keys.slot("orders")
    assert _keys.slot("{user1000}.following") == _keys.slot("{user1000}.followers")


def test_slot_uses_the_first_hash_tag_only() -> None:
    assert _keys.slot("foo{bar}{zap}") == _keys.slot("bar")


def test_slot_hashes_the_whole_key_when_the_tag_is_empty_or_unclosed() -> None:
    assert _keys.slot("foo{}{bar}") == _keys.crc16(b"foo{}{bar}") % 16384
    assert _keys.slot("foo{bar") == _keys.crc16(b"foo{bar") % 16384


def test_slot_is_always_in_range() -> None:
    assert all(0 <= _keys.slot(f"key:{i}") < 16384 for i in range(2000))


def test_every_key_of_one_queue_shares_the_queue_slot() -> None:
    ks = _keys.Keyspace.for_queue("orders")
    keys = [
        ks.root,
        *ks.all_fixed(),
        ks.job(JOB_ID),
        ks.lane("_"),
        ks.lane("chat:-100123@eu"),
        ks.lane_limiter("tenant.a"),
        ks.dedup("order-42:v1"),
    ]
    assert {_keys.slot(key) for key in keys} == {_keys.slot("orders")}


def test_all_fixed_lists_every_fixed_key_attribute() -> None:
    ks = _keys.Keyspace.for_queue("orders")
    fixed = {getattr(ks, f.name) for f in dataclasses.fields(ks) if f.name not in ("queue", "root")}
    assert set(ks.all_fixed()) == fixed
    assert len(ks.all_fixed()) == len(fixed)


def test_keyspace_builds_the_spec_key_names() -> None:
    ks = _keys.Keyspace.for_queue("orders")
    assert ks.root == "emq:{orders}:"
    assert ks.ring == "emq:{orders}:ring"
    assert ks.paused == "emq:{orders}:paused"
    assert ks.glimit == "emq:{orders}:glimit"
    assert ks.gactive == "emq:{orders}:gactive"
    assert ks.gweight == "emq:{orders}:gweight"
    assert ks.grate == "emq:{orders}:grate"
    assert ks.turn == "emq:{orders}:turn"
    assert ks.rdue == "emq:{orders}:rdue"
    assert ks.active == "emq:{orders}:active"
    assert ks.schedule == "emq:{orders}:schedule"
    assert ks.dead == "emq:{orders}:dead"
    assert ks.wake == "emq:{orders}:wake"
    assert ks.meta == "emq:{orders}:meta"
    assert ks.limiter == "emq:{orders}:limiter"
    assert ks.events == "emq:{orders}:events"
    assert ks.completed == "emq:{orders}:metrics:completed"
    assert ks.failed == "emq:{orders}:metrics:failed"
    assert ks.job(JOB_ID) == "emq:{orders}:job:JOB0KHTOWnGLuC"
    assert ks.lane("vip") == "emq:{orders}:g:vip:pending"
    assert ks.lane_limiter("vip") == "emq:{orders}:g:vip:limiter"
    assert ks.dedup("k1") == "emq:{orders}:de:k1"


def test_job_key_spends_seventeen_bytes_before_the_id_for_queue_orders() -> None:
    ks = _keys.Keyspace.for_queue("orders")
    assert len(ks.job(JOB_ID)) == 17 + 14


def test_version_key_lives_in_the_deployment_reserve() -> None:
    assert _keys.VERSION_KEY == "{emq}:version"
    assert _keys.slot(_keys.VERSION_KEY) == _keys.slot("emq")


def test_keyspace_is_frozen_and_equal_by_queue() -> None:
    ks = _keys.Keyspace.for_queue("orders")
    assert ks == _keys.Keyspace("orders")
    assert repr(ks) == "Keyspace(queue='orders')"
    with pytest.raises(dataclasses.FrozenInstanceError):
        ks.queue = "other"  # type: ignore[misc]


def test_job_key_is_kind_blind_but_refuses_malformed_ids() -> None:
    ks = _keys.Keyspace.for_queue("orders")
    assert ks.job("ORD0KHTOWnGLuC") == "emq:{orders}:job:ORD0KHTOWnGLuC"
    with pytest.raises(InvalidArgument) as refused:
        ks.job("JOB0KHTOWnGLu")
    assert refused.value.argument == "job id"
    assert refused.value.reason == "must be exactly 14 characters, got 13"


# --- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["orders", "a", "A.b_c-9", "x" * 128, "emq2", "EMQ"])
def test_legal_queue_names_are_accepted(name: str) -> None:
    assert _keys.validate_queue(name) == name
    assert _keys.Keyspace.for_queue(name).queue == name


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "must be 1 to 128 characters, got 0"),
        ("x" * 129, "must be 1 to 128 characters, got 129"),
        ("or{ders}", "character '{' at position 2 is not allowed (allowed: A-Za-z0-9._-)"),
        ("a:b", "character ':' at position 1 is not allowed (allowed: A-Za-z0-9._-)"),
        ("a b", "character ' ' at position 1 is not allowed (allowed: A-Za-z0-9._-)"),
        ("orders\n", "character '\\n' at position 6 is not allowed (allowed: A-Za-z0-9._-)"),
        ("ordérs", "character 'é' at position 3 is not allowed (allowed: A-Za-z0-9._-)"),
        ("emq", "'emq' is reserved for the deployment-wide {emq}: keys"),
        (None, "must be a str, got NoneType"),
        (b"orders", "must be a str, got bytes"),
    ],
)
def test_illegal_queue_names_are_refused_with_their_reason(name: object, reason: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        _keys.validate_queue(name)
    assert refused.value.argument == "queue name"
    assert refused.value.reason == reason
    with pytest.raises(InvalidArgument):
        _keys.Keyspace.for_queue(name)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["_", "-100123456", "chat:42", "a@b.c", "g" * 128])
def test_legal_group_names_are_accepted(name: str) -> None:
    assert _keys.validate_group(name) == name


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "must be 1 to 128 characters, got 0"),
        ("g" * 129, "must be 1 to 128 characters, got 129"),
        ("a/b", "character '/' at position 1 is not allowed (allowed: A-Za-z0-9._:@-)"),
        ("{x}", "character '{' at position 0 is not allowed (allowed: A-Za-z0-9._:@-)"),
        (42, "must be a str, got int"),
    ],
)
def test_illegal_group_names_are_refused_with_their_reason(name: object, reason: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        _keys.validate_group(name)
    assert refused.value.argument == "group"
    assert refused.value.reason == reason


def test_lane_keys_refuse_an_illegal_group() -> None:
    ks = _keys.Keyspace.for_queue("orders")
    with pytest.raises(InvalidArgument, match="group"):
        ks.lane("a b")
    with pytest.raises(InvalidArgument, match="group"):
        ks.lane_limiter("")


@pytest.mark.parametrize("key", ["k", "order:42@v1", "d" * 255])
def test_legal_dedup_keys_are_accepted(key: str) -> None:
    assert _keys.validate_dedup(key) == key


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "must be 1 to 255 characters, got 0"),
        ("d" * 256, "must be 1 to 255 characters, got 256"),
        ("a*b", "character '*' at position 1 is not allowed (allowed: A-Za-z0-9._:@-)"),
    ],
)
def test_illegal_dedup_keys_are_refused_with_their_reason(key: str, reason: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        _keys.Keyspace.for_queue("orders").dedup(key)
    assert refused.value.argument == "dedup key"
    assert refused.value.reason == reason

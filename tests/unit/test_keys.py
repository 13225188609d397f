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
    names = [f.name for f in dataclasses.fields(ks) if f.name not in ("queue", "tag", "root")]
    fixed = {getattr(ks, name) for name in names}
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


#: Names the old rule refused; every one is legal now, byte for byte.
ANY_NAMES = [
    "_",
    "-100123456",
    "chat:42",
    "billing+eu@acme.test",
    "a b",
    "{x}",
    "}{",
    "a/b",
    "a*b?[c]",
    'say "hi"',
    "line\nbreak",
    "back\\slash",
    "nul\x00byte",
    "Zürich 🚀",
    "g" * _keys.MAX_NAME_BYTES,
    "é" * (_keys.MAX_NAME_BYTES // 2),
]


@pytest.mark.parametrize("name", ANY_NAMES)
def test_any_name_of_at_most_the_byte_bound_is_a_lane_a_dedup_key_and_a_bucket(name: str) -> None:
    assert _keys.validate_group(name) == name
    assert _keys.validate_dedup(name) == name
    assert _keys.validate_bucket(name) == name
    ks = _keys.Keyspace.for_queue("orders")
    assert ks.lane(name) == "emq:{orders}:g:" + name + ":pending"
    assert ks.lane_limiter(name) == "emq:{orders}:g:" + name + ":limiter"
    assert ks.dedup(name) == "emq:{orders}:de:" + name
    # The queue's tag comes first: a brace in the name never moves a key off the queue's slot.
    root = _keys.slot(ks.root)
    assert {_keys.slot(ks.lane(name)), _keys.slot(ks.dedup(name))} == {root}
    assert _keys.slot(_keys.bucket_key("orders", name)) == root


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "must be 1 to 1024 bytes of UTF-8, got 0"),
        ("g" * 1025, "must be 1 to 1024 bytes of UTF-8, got 1025"),
        ("é" * 512 + "x", "must be 1 to 1024 bytes of UTF-8, got 1025"),
        (
            "ab\udfff",
            "holds a lone surrogate '\\udfff' at position 2: not a character, it has no UTF-8 "
            "encoding",
        ),
        (42, "must be a str, got int"),
        (b"acme", "must be a str, got bytes"),
        (None, "must be a str, got NoneType"),
    ],
)
def test_bad_names_are_refused_with_their_reason_and_argument(name: object, reason: str) -> None:
    ks = _keys.Keyspace.for_queue("orders")
    checks = [
        ("lane", _keys.validate_group),
        ("lane", ks.lane),
        ("lane", ks.lane_limiter),
        ("dedup key", _keys.validate_dedup),
        ("dedup key", ks.dedup),
        ("bucket name", _keys.validate_bucket),
    ]
    for argument, check in checks:
        with pytest.raises(InvalidArgument) as refused:
            check(name)  # type: ignore[arg-type]
        assert (refused.value.argument, refused.value.reason) == (argument, reason)


def _ends(pattern: str) -> tuple[str, str]:
    """The literal text before the first and after the last placeholder (all of a fixed key)."""
    if "<" not in pattern:
        return pattern, pattern
    return pattern[: pattern.index("<")], pattern[pattern.rindex(">") + 1 :]


def _may_collide(a: str, b: str) -> bool:
    """False when no filling of the two patterns' placeholders, whatever their bytes, can give
    the same key: their heads differ at some byte, or their tails do."""
    (head_a, tail_a), (head_b, tail_b) = _ends(a), _ends(b)
    heads_agree = head_a.startswith(head_b) or head_b.startswith(head_a)
    tails_agree = tail_a.endswith(tail_b) or tail_b.endswith(tail_a)
    return heads_agree and tails_agree


def test_no_name_can_make_one_key_shape_spell_another() -> None:
    # Names go into keys raw (any bytes), so the layout itself must keep the shapes apart: a
    # lane named `a:pending` has g:a:pending:pending, never lane `a`'s g:a:pending:limiter.
    # Keys of the queue are compared after its root (a queue name holds no brace, so the root
    # `emq:{q}:` ends where the first `}:` does); the deployment-wide keys as they are.
    queue_shapes = [
        s.pattern.removeprefix(_keys.QUEUE_ROOT)
        for s in _keys.LAYOUT
        if s.pattern.startswith(_keys.QUEUE_ROOT) and s.pattern != _keys.QUEUE_ROOT
    ]
    other_shapes = [s.pattern for s in _keys.LAYOUT if not s.pattern.startswith(_keys.QUEUE_ROOT)]
    for shapes in (queue_shapes, [_keys.QUEUE_ROOT, *other_shapes]):
        for i, a in enumerate(shapes):
            assert a.count("<") <= (2 if a.startswith("emqb:") else 1), a  # one name per key
            for b in shapes[i + 1 :]:
                assert not _may_collide(a, b), f"a name could make {a!r} spell {b!r}"


def test_the_collision_check_flags_a_suffix_that_ends_another() -> None:
    assert _may_collide("g:<group>:pending", "g:<group>:x:pending")  # lane `a:x` vs lane `a`
    assert _may_collide("d<key>", "dedups")  # a dedup key `edups` would be the index
    assert not _may_collide("g:<group>:pending", "g:<group>:limiter")


# --- shard tags ---------------------------------------------------------------------------------


def test_a_shard_tag_is_the_queue_then_tilde_shard_then_the_nonce() -> None:
    assert _keys.shard_tag("orders", 0) == "orders"
    assert _keys.shard_tag("orders", 3) == "orders~3"
    assert _keys.shard_tag("orders.v2", 3, 17) == "orders.v2~3.17"
    for tag, parsed in [("orders", ("orders", 0)), ("orders.v2~3.17", ("orders.v2", 3))]:
        assert _keys.parse_shard_tag(tag) == parsed


def test_no_queue_name_can_hold_the_shard_mark() -> None:
    with pytest.raises(InvalidArgument) as refused:
        _keys.validate_queue("orders~1")
    assert refused.value.reason == (
        "character '~' at position 6 is not allowed (allowed: A-Za-z0-9._-)"
    )


def test_a_shard_keyspace_lives_on_its_tags_slot_and_keeps_its_queue() -> None:
    shard = _keys.Keyspace.for_shard("orders~2.5")
    assert (shard.queue, shard.tag, shard.root) == ("orders", "orders~2.5", "emq:{orders~2.5}:")
    assert repr(shard) == "Keyspace(queue='orders', tag='orders~2.5')"
    keys = [*shard.all_fixed(), shard.job(JOB_ID), shard.lane("{orders}"), shard.dedup("k")]
    assert {_keys.slot(key) for key in keys} == {_keys.slot("orders~2.5")}
    assert shard.ring == "emq:{orders~2.5}:ring"
    assert shard != _keys.Keyspace("orders")
    assert _keys.Keyspace.for_shard("orders") == _keys.Keyspace("orders")
    assert _keys.Keyspace("orders", "orders~2.5") == shard


@pytest.mark.parametrize(
    ("tag", "reason"),
    [
        ("orders~0", "must be <queue>, <queue>~<shard> or <queue>~<shard>.<nonce>"),
        ("orders~01", "must be <queue>, <queue>~<shard> or <queue>~<shard>.<nonce>"),
        ("orders~1.0", "must be <queue>, <queue>~<shard> or <queue>~<shard>.<nonce>"),
        ("orders~1.", "must be <queue>, <queue>~<shard> or <queue>~<shard>.<nonce>"),
        ("orders~1~2", "must be <queue>, <queue>~<shard> or <queue>~<shard>.<nonce>"),
        ("~1", "must be <queue>, <queue>~<shard> or <queue>~<shard>.<nonce>"),
        ("orders~" + "9" * 5000, "must be <queue>, <queue>~<shard> or <queue>~<shard>.<nonce>"),
        ("orders~256", "its shard must be below 256"),
        ("orders~1.1000000", "its nonce must be below 1000000"),
        ("emq~1", "its queue 'emq' is reserved for the deployment-wide {emq}: keys"),
        ("x" * 129 + "~1", "its queue must be 1 to 128 characters, got 129"),
        (7, "must be a str, got int"),
    ],
)
def test_a_bad_shard_tag_is_refused_with_its_reason(tag: object, reason: str) -> None:
    for parse in (_keys.parse_shard_tag, _keys.Keyspace.for_shard):
        with pytest.raises(InvalidArgument) as refused:
            parse(tag)  # type: ignore[operator]
        assert refused.value.argument == "shard tag"
        assert refused.value.reason.startswith(reason)


def test_a_keyspace_refuses_another_queues_tag() -> None:
    with pytest.raises(InvalidArgument) as refused:
        _keys.Keyspace("orders", "billing~1")
    assert (refused.value.argument, refused.value.reason) == (
        "shard tag",
        "is not a tag of queue 'orders'",
    )


@pytest.mark.parametrize(
    ("index", "nonce", "argument"),
    [(-1, 0, "shard"), (256, 0, "shard"), (True, 0, "shard"), (1, -1, "nonce"), (0, 3, "nonce")],
)
def test_a_shard_tag_is_built_only_from_a_shard_and_a_nonce_in_range(
    index: int, nonce: int, argument: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        _keys.shard_tag("orders", index, nonce)
    assert refused.value.argument == argument

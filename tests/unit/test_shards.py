"""A sharded queue's placement (docs/concepts/shards.md): the lane-slot function, the slot table
a new queue starts with, the tags chosen to spread its shards over a cluster's primaries, and
``ShardMap``, validated field by field and stored as the directory's fields; the fence a producer
sends (its ARGV layout) and the writes that make a keyspace a shard."""

from __future__ import annotations

import pytest

from echomq.engine import keys as _keys
from echomq.engine.options import FENCE_MARK, Fence, admission_argv, fence
from echomq.engine.producer import verdict as producer_verdict
from echomq.engine.shard_schedule import MAX_SHARDS
from echomq.engine.shards import (
    ShardMap,
    choose_tags,
    initial_table,
    lane_slot,
)
from echomq.errors import InvalidArgument, LaneMoved, server_error

SLOTS = _keys.SLOTS
#: Three primaries, listed out of address order; 7010 sorts after 7002 by number, not by text.
PRIMARIES = ("10.0.0.2:7000", "10.0.0.1:7010", "10.0.0.1:7002")


def three_primaries() -> list[str]:
    """A cluster's slot map: a third of the slots on each primary."""
    return [PRIMARIES[s * 3 // SLOTS] for s in range(SLOTS)]


# --- the lane slot ------------------------------------------------------------------------------


def test_lane_slot_is_the_cluster_crc16_of_the_whole_name() -> None:
    assert lane_slot("123456789") == 12739  # the cluster's test vector
    assert lane_slot("tenant-42") == _keys.slot("tenant-42")
    # No hash tag is looked for: braces in a lane name are bytes like any other.
    assert lane_slot("{a}b") == _keys.crc16(b"{a}b") % SLOTS != _keys.slot("{a}b")
    assert lane_slot("Zürich 🚀") == _keys.crc16("Zürich 🚀".encode()) % SLOTS


@pytest.mark.parametrize("lane", ["", b"vip", None, "x" * 1025])
def test_lane_slot_refuses_what_is_not_a_lane_name(lane: object) -> None:
    with pytest.raises(InvalidArgument) as refused:
        lane_slot(lane)  # type: ignore[arg-type]
    assert refused.value.argument == "lane"


# --- the initial slot table ---------------------------------------------------------------------


def test_the_initial_table_gives_each_shard_one_run_of_floor_bounds() -> None:
    assert initial_table(1) == ((0, 0),)
    assert initial_table(3) == ((0, 0), (5461, 1), (10922, 2))
    assert initial_table(6) == ((0, 0), (2730, 1), (5461, 2), (8192, 3), (10922, 4), (13653, 5))


@pytest.mark.parametrize("shards", [0, -1, MAX_SHARDS + 1, 2.0, True, "3", None])
def test_a_shard_count_outside_one_to_max_shards_is_refused(shards: object) -> None:
    for build in (initial_table, lambda s: choose_tags("orders", s)):
        with pytest.raises(InvalidArgument) as refused:
            build(shards)
        assert refused.value.argument == "shards"


# --- tag choice ---------------------------------------------------------------------------------


def test_on_one_server_shard_k_is_tagged_q_tilde_k() -> None:
    assert choose_tags("orders", 1) == ("orders",)
    assert choose_tags("orders", 4) == ("orders", "orders~1", "orders~2", "orders~3")


def test_on_a_cluster_the_shards_go_round_the_primaries_from_the_queues_own() -> None:
    owners = three_primaries()
    tags = choose_tags("orders", 6, owners)
    assert tags[0] == "orders"
    assert all(_keys.parse_shard_tag(tag) == ("orders", k) for k, tag in enumerate(tags))
    on = [owners[_keys.slot("{" + tag + "}")] for tag in tags]
    # Address order: host, then port as a number.
    order = ["10.0.0.1:7002", "10.0.0.1:7010", "10.0.0.2:7000"]
    home = order.index(on[0])
    assert on == [order[(home + k) % 3] for k in range(6)]
    # Each tag is the first candidate that lands there: no smaller nonce would have.
    for k, tag in enumerate(tags[1:], start=1):
        nonce = int(tag.partition(".")[2] or 0)
        earlier = ([f"orders~{k}"] if nonce else []) + [f"orders~{k}.{n}" for n in range(1, nonce)]
        assert all(owners[_keys.slot(t)] != on[k] for t in earlier)


def test_six_shards_cover_three_primaries_twice_each_for_many_queues() -> None:
    owners = three_primaries()
    for i in range(50):
        tags = choose_tags(f"q{i}", 6, owners)
        on = [owners[_keys.slot(tag)] for tag in tags]
        assert sorted(on.count(p) for p in PRIMARIES) == [2, 2, 2], tags


def test_a_one_primary_cluster_takes_the_plain_tags() -> None:
    assert choose_tags("orders", 3, ["10.0.0.1:7000"] * SLOTS) == choose_tags("orders", 3)


def test_a_primary_holding_one_slot_still_gets_its_shards() -> None:
    owners = ["a:1"] * SLOTS
    owners[4242] = "b:1"
    tags = choose_tags("orders", 4, owners)
    assert [owners[_keys.slot(tag)] for tag in tags] == ["a:1", "b:1", "a:1", "b:1"]


@pytest.mark.parametrize(
    ("owners", "reason"),
    [
        ("a:1" * SLOTS, "must be a sequence of addresses, one per slot"),
        (["a:1"] * (SLOTS - 1), f"must be {SLOTS} str addresses, one per slot"),
        ([b"a:1"] * SLOTS, f"must be {SLOTS} str addresses, one per slot"),
        ([""] * SLOTS, "no primary serves the slot of queue 'orders'"),
    ],
)
def test_a_slot_map_that_is_not_one_address_per_slot_is_refused(
    owners: object, reason: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        choose_tags("orders", 3, owners)  # type: ignore[arg-type]
    assert (refused.value.argument, refused.value.reason) == ("owners", reason)


def test_tag_choice_refuses_a_bad_queue_name() -> None:
    with pytest.raises(InvalidArgument) as refused:
        choose_tags("or~ders", 2)
    assert refused.value.argument == "queue name"


# --- ShardMap -----------------------------------------------------------------------------------


def test_a_new_map_places_each_lane_by_its_slot() -> None:
    shard_map = ShardMap.create("orders", 3)
    assert (shard_map.queue, shard_map.shards, shard_map.epoch) == ("orders", 3, 1)
    assert shard_map.slots_of(1) == (range(5461, 10922),)
    for lane in ("vip", "tenant-7", "_", "Zürich"):
        assert shard_map.shard_of(lane) == lane_slot(lane) * 3 // SLOTS
    assert [shard_map.owner(s) for s in (0, 5460, 5461, 10921, 10922, 16383)] == [0, 0, 1, 1, 2, 2]


def test_an_override_moves_its_lane_and_no_other() -> None:
    plain = ShardMap.create("orders", 3)
    moved = ShardMap(plain.tags, plain.table, (("vip", (plain.shard_of("vip") + 1) % 3),), 2)
    assert moved.shard_of("vip") == (plain.shard_of("vip") + 1) % 3
    assert [moved.shard_of(f"t{i}") for i in range(100)] == [
        plain.shard_of(f"t{i}") for i in range(100)
    ]


def test_overrides_are_kept_sorted_by_lane() -> None:
    unsorted = (("b", 1), ("a", 0))
    shard_map = ShardMap(("q", "q~1"), ((0, 0), (8192, 1)), unsorted, 3)
    assert shard_map.overrides == (("a", 0), ("b", 1))
    assert shard_map == ShardMap(("q", "q~1"), ((0, 0), (8192, 1)), (("a", 0), ("b", 1)), 3)


def test_a_table_of_many_runs_gives_a_shard_each_of_its_runs() -> None:
    shard_map = ShardMap(("q", "q~1.9", "q~2"), ((0, 0), (100, 2), (200, 0), (16000, 1)))
    assert shard_map.slots_of(0) == (range(0, 100), range(200, 16000))
    assert shard_map.slots_of(1) == (range(16000, SLOTS),)
    assert shard_map.slots_of(2) == (range(100, 200),)
    assert shard_map.keyspace(1).root == "emq:{q~1.9}:"
    assert shard_map.keyspace(0) == _keys.Keyspace("q")


def test_a_shard_may_own_no_slot_while_the_count_grows() -> None:
    shard_map = ShardMap(("q", "q~1", "q~2"), ((0, 0), (8192, 1)))
    assert shard_map.slots_of(2) == ()
    assert shard_map.owns_bitmap(2) == bytes(SLOTS // 8)


def test_the_owns_bitmap_sets_a_bit_per_owned_slot_most_significant_first() -> None:
    shard_map = ShardMap(("q", "q~1"), ((0, 1), (1, 0), (9, 1), (10, 0)))
    one = shard_map.owns_bitmap(1)
    assert len(one) == SLOTS // 8
    assert one[:2] == bytes([0b1000_0000, 0b0100_0000])  # slots 0 and 9
    assert not any(one[2:])
    zero = shard_map.owns_bitmap(0)
    assert bytes(a | b for a, b in zip(one, zero, strict=True)) == b"\xff" * (SLOTS // 8)
    assert not any(a & b for a, b in zip(one, zero, strict=True))


def test_the_map_round_trips_through_the_directory_fields_as_valkey_returns_them() -> None:
    shard_map = ShardMap(
        ("q", "q~1.4", "q~2"), ((0, 0), (5000, 2), (9000, 1)), (("Zürich", 2), ("a b", 0)), 7
    )
    assert shard_map.to_directory() == {
        "count": "3",
        "epoch": "7",
        "tags": "q q~1.4 q~2",
        "table": "0:0 5000:2 9000:1",
    }
    assert shard_map.to_placed() == {"Zürich": "2", "a b": "0"}
    raw = {k.encode(): v.encode() for k, v in shard_map.to_directory().items()}
    raw[b"budget"] = b"later fields are left to their readers"
    placed = {k.encode(): v.encode() for k, v in shard_map.to_placed().items()}
    assert ShardMap.from_stored(raw, placed) == shard_map
    assert ShardMap.from_stored(shard_map.to_directory()) == ShardMap(
        shard_map.tags, shard_map.table, (), 7
    )


GOOD_TAGS = ("q", "q~1", "q~2")
GOOD_TABLE = ((0, 0), (5461, 1), (10922, 2))


@pytest.mark.parametrize(
    ("tags", "table", "overrides", "epoch", "argument"),
    [
        ((), GOOD_TABLE, (), 1, "tags"),
        ("q", GOOD_TABLE, (), 1, "tags"),
        (("q", "q~2", "q~1"), GOOD_TABLE, (), 1, "tags"),
        (("q", "p~1", "q~2"), GOOD_TABLE, (), 1, "tags"),
        (("q~1", "q~1", "q~2"), GOOD_TABLE, (), 1, "tags"),
        (("q", "q~1", "q~2.0"), GOOD_TABLE, (), 1, "shard tag"),
        (("q", "q~1", "q-2"), GOOD_TABLE, (), 1, "tags"),
        (("emq", "emq~1", "emq~2"), GOOD_TABLE, (), 1, "shard tag"),
        (tuple(f"q~{k}" if k else "q" for k in range(MAX_SHARDS + 1)), GOOD_TABLE, (), 1, "tags"),
        (GOOD_TAGS, (), (), 1, "table"),
        (GOOD_TAGS, ((1, 0), (5461, 1)), (), 1, "table"),
        (GOOD_TAGS, ((0, 0), (5461, 3)), (), 1, "table"),
        (GOOD_TAGS, ((0, 0), (5461, -1)), (), 1, "table"),
        (GOOD_TAGS, ((0, 0), (5461, 0)), (), 1, "table"),
        (GOOD_TAGS, ((0, 0), (10922, 1), (5461, 2)), (), 1, "table"),
        (GOOD_TAGS, ((0, 0), (SLOTS, 1)), (), 1, "table"),
        (GOOD_TAGS, ((0, 0), (5461.0, 1)), (), 1, "table"),
        (GOOD_TAGS, ((0, 0), (5461, True)), (), 1, "table"),
        (GOOD_TAGS, ((0, 0, 0),), (), 1, "table"),
        (GOOD_TAGS, "0:0", (), 1, "table"),
        (GOOD_TAGS, GOOD_TABLE, (("vip", 3),), 1, "overrides"),
        (GOOD_TAGS, GOOD_TABLE, (("vip", "1"),), 1, "overrides"),
        (GOOD_TAGS, GOOD_TABLE, (("", 1),), 1, "overrides"),
        (GOOD_TAGS, GOOD_TABLE, ((b"vip", 1),), 1, "overrides"),
        (GOOD_TAGS, GOOD_TABLE, (("vip", 1), ("vip", 2)), 1, "overrides"),
        (GOOD_TAGS, GOOD_TABLE, {"vip": 1}, 1, "overrides"),
        (GOOD_TAGS, GOOD_TABLE, (), 0, "epoch"),
        (GOOD_TAGS, GOOD_TABLE, (), True, "epoch"),
        (GOOD_TAGS, GOOD_TABLE, (), "1", "epoch"),
    ],
)
def test_a_bad_map_is_refused_naming_the_field(
    tags: object, table: object, overrides: object, epoch: object, argument: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        ShardMap(tags, table, overrides, epoch)  # type: ignore[arg-type]
    assert refused.value.argument == argument


def test_lookups_refuse_a_shard_or_slot_out_of_range() -> None:
    shard_map = ShardMap.create("q", 3)
    for call in (shard_map.slots_of, shard_map.owns_bitmap, shard_map.keyspace):
        for shard in (-1, 3, True):
            with pytest.raises(InvalidArgument) as refused:
                call(shard)
            assert refused.value.argument == "shard"
    for slot in (-1, SLOTS, 1.0):
        with pytest.raises(InvalidArgument) as refused:
            shard_map.owner(slot)  # type: ignore[arg-type]
        assert refused.value.argument == "lane slot"


@pytest.mark.parametrize(
    ("directory", "placed", "argument"),
    [
        ({"epoch": "1", "tags": "q", "table": "0:0"}, None, "directory"),
        ({"count": "2", "epoch": "1", "tags": "q", "table": "0:0"}, None, "directory"),
        ({"count": "1", "epoch": "x", "tags": "q", "table": "0:0"}, None, "directory"),
        ({"count": "1", "epoch": "1", "tags": "q", "table": "0-0"}, None, "directory"),
        ({"count": "1", "epoch": "1", "tags": "q", "table": "0:-1"}, None, "directory"),
        ({"count": "1", "epoch": "1", "tags": "q", "table": "5:0"}, None, "table"),
        ({b"count": b"1", b"epoch": b"1", b"tags": b"\xff", b"table": b"0:0"}, None, "directory"),
        ({"count": "1", "epoch": "1", "tags": "q", "table": "0:0"}, {"vip": "one"}, "placed"),
        ({"count": "1", "epoch": "1", "tags": "q", "table": "0:0"}, {"vip": "1"}, "overrides"),
    ],
)
def test_a_corrupt_directory_is_refused_naming_what_holds_it(
    directory: dict[str, str], placed: dict[str, str] | None, argument: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        ShardMap.from_stored(directory, placed)
    assert refused.value.argument == argument


# --- the fence ----------------------------------------------------------------------------------


def test_a_fenced_call_opens_with_the_mark_and_epoch_and_puts_each_slot_after_its_item() -> None:
    items = [("JOB1", b"a", "x"), ("JOB2", b"b", "y")]
    assert admission_argv(items) == ["JOB1", b"a", "x", "JOB2", b"b", "y"]  # unsharded: as ever
    shard_map = ShardMap.create("orders", 3)
    fenced = shard_map.fence(["x", "y"])
    assert fenced == Fence(1, (lane_slot("x"), lane_slot("y")))
    assert admission_argv(items, fenced) == [
        FENCE_MARK, 1, "JOB1", b"a", "x", lane_slot("x"), "JOB2", b"b", "y", lane_slot("y")
    ]  # fmt: skip
    assert fenced.part(1, 2) == Fence(1, (lane_slot("y"),))
    with pytest.raises(InvalidArgument, match="slots"):
        admission_argv(items, fenced.part(0, 1))


@pytest.mark.parametrize(
    ("epoch", "slots", "argument"),
    [(-1, [0], "epoch"), (True, [0], "epoch"), (2**53, [0], "epoch"), (1, [16384], "slot"),
     (1, [-1], "slot"), (1, ["7"], "slot")],
)  # fmt: skip
def test_a_fence_out_of_bounds_is_refused_naming_it(
    epoch: object, slots: list[object], argument: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        fence(epoch, slots)  # type: ignore[arg-type]
    assert refused.value.argument == argument


def test_the_fence_commands_write_owns_meta_and_the_overrides_on_both_sides() -> None:
    created = ShardMap.create("orders", 3)
    lane = next(f"l{i}" for i in range(100) if created.shard_of(f"l{i}") == 1)
    shard_map = ShardMap(created.tags, created.table, ((lane, 2),), epoch=4)
    home, target = shard_map.keyspace(1), shard_map.keyspace(2)
    assert shard_map.fence_commands(1) == [
        ("SET", home.owns, shard_map.owns_bitmap(1)),
        ("HSET", home.meta, "shard", 1, "epoch", 4),
        ("DEL", home.moved, home.adopted),
        ("HSET", home.moved, lane, 2),
    ]
    assert shard_map.fence_commands(2)[3:] == [("HSET", target.adopted, lane, "")]
    assert len(shard_map.fence_commands(0)) == 3  # no override touches shard 0


def test_an_emqmoved_refusal_carries_the_shard_the_epochs_and_the_lane() -> None:
    moved = server_error("EMQMOVED 2 epoch 7, sent at 5: lane Zürich: a b")
    assert isinstance(moved, LaneMoved)
    assert (moved.shard, moved.epoch, moved.sent, moved.lane) == (2, 7, 5, "Zürich: a b")
    unknown = server_error("EMQMOVED ? epoch 1, sent at 1: lane vip")
    assert isinstance(unknown, LaneMoved)
    assert unknown.shard is None
    verdict = producer_verdict(unknown, "JOB1")
    assert (verdict.kind, verdict.reason, verdict.ok) == ("rejected", "lane moved", False)

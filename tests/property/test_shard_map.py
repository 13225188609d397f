"""Lane placement's pure maths (docs/concepts/shards.md, "Lane placement"): the initial slot
table partitions the 16,384 lane slots among S shards for every S from 1 to MAX_SHARDS, and a
lane's shard is a function of the map alone: the same through the directory's fields, moved
only by its own override, and the one bit set among the shards' ``owns`` bitmaps."""

from __future__ import annotations

import itertools
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from echomq.engine.keys import SLOTS
from echomq.engine.shard_schedule import MAX_SHARDS
from echomq.engine.shards import ShardMap, grow_plan, initial_table, lane_slot

shard_counts = st.integers(1, MAX_SHARDS)
lanes = st.text(min_size=1, max_size=40)  # any characters: at most 160 bytes, a legal lane


def test_the_initial_table_partitions_the_lane_slots_for_every_shard_count() -> None:
    for shards in range(1, MAX_SHARDS + 1):
        shard_map = ShardMap.create("q", shards)
        runs = [shard_map.slots_of(k) for k in range(shards)]
        assert all(len(own) == 1 for own in runs), shards  # one run each, in shard order
        ranges = [own[0] for own in runs]
        assert ranges[0].start == 0
        assert ranges[-1].stop == SLOTS
        assert all(a.stop == b.start for a, b in itertools.pairwise(ranges))
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1, shards


@given(shards=shard_counts, slot=st.integers(0, SLOTS - 1))
def test_every_lane_slot_has_exactly_one_owner(shards: int, slot: int) -> None:
    shard_map = ShardMap(tuple(["q"] + [f"q~{k}" for k in range(1, shards)]), initial_table(shards))
    owners = [k for k in range(shards) if any(slot in run for run in shard_map.slots_of(k))]
    assert owners == [shard_map.owner(slot)]
    k = owners[0]  # the doc's rule: shard k owns 16384·k // S up to 16384·(k+1) // S
    assert SLOTS * k // shards <= slot < SLOTS * (k + 1) // shards


@given(shards=shard_counts, lane=lanes)
def test_a_lanes_shard_survives_the_directory_and_matches_the_owns_bits(
    shards: int, lane: str
) -> None:
    shard_map = ShardMap.create("q", shards)
    shard = shard_map.shard_of(lane)
    assert shard == shard_map.owner(lane_slot(lane))
    stored = {k.encode(): v.encode() for k, v in shard_map.to_directory().items()}
    assert ShardMap.from_stored(stored).shard_of(lane) == shard
    assert ShardMap.create("q", shards).shard_of(lane) == shard
    slot = lane_slot(lane)
    bits = [shard_map.owns_bitmap(k)[slot >> 3] & (0x80 >> (slot & 7)) for k in range(shards)]
    assert [k for k, bit in enumerate(bits) if bit] == [shard]


@given(
    shards=st.integers(2, 16),
    moved=st.dictionaries(lanes, st.integers(0, 15), max_size=8),
    others=st.lists(lanes, max_size=20),
)
def test_overrides_move_their_own_lanes_and_no_other(
    shards: int, moved: dict[str, int], others: list[str]
) -> None:
    plain = ShardMap.create("q", shards)
    overrides = tuple((lane, shard % shards) for lane, shard in moved.items())
    placed = ShardMap(plain.tags, plain.table, overrides, 2)
    for lane, shard in overrides:
        assert placed.shard_of(lane) == shard
    for lane in others:
        if lane not in moved:
            assert placed.shard_of(lane) == plain.shard_of(lane)
    stored = {k.encode(): v.encode() for k, v in placed.to_placed().items()}
    assert ShardMap.from_stored(placed.to_directory(), stored) == placed


def _owners(table: tuple[tuple[int, int], ...]) -> list[int]:
    ends = [first for first, _ in table[1:]] + [SLOTS]
    return [
        shard for (first, shard), end in zip(table, ends, strict=True) for _ in range(first, end)
    ]


@given(steps=st.lists(st.integers(1, 40), min_size=1, max_size=4), start=st.integers(1, 60))
def test_growing_hands_whole_ranges_and_leaves_every_shard_its_share(
    steps: list[int], start: int
) -> None:
    # Grow S -> S' (and again, from the grown table): the new table partitions 0..16383 (a
    # ShardMap takes it), only the handed slots change owner, each from the old owner to a new
    # shard, and every shard ends with about 1/S' of the space (the last new shard takes what
    # old shards short of their share could not give: one slot each at most).
    shards, table = start, initial_table(start)
    for step in steps:
        grown = min(shards + step, MAX_SHARDS)
        if grown == shards:
            break
        new_table, handoffs = grow_plan(table, shards, grown)
        ShardMap(tuple(["q"] + [f"q~{k}" for k in range(1, grown)]), new_table)
        before, after = _owners(table), _owners(new_table)
        handed = {
            slot: (source, target) for a, b, source, target in handoffs for slot in range(a, b)
        }
        for slot in range(SLOTS):
            if slot in handed:
                assert (before[slot], after[slot]) == handed[slot]
                assert after[slot] >= shards
            else:
                assert after[slot] == before[slot]
        tally = Counter(after)
        sizes = [tally[k] for k in range(grown)]
        assert all(abs(size - SLOTS / grown) <= shards + 1 for size in sizes), sizes
        shards, table = grown, new_table

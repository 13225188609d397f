"""Growing a sharded queue, its first part: new shards made empty, and the lane-slot ranges
they will take marked on both sides (docs/concepts/shards.md, "Changing S", steps 1 and 2).

:func:`add_shards` makes shards S..S'-1 (tags as the first open chooses them, meta copied from
shard 0, no lane slot owned, no quota of a queue-wide budget), records them in the directory
(``count``, ``tags``, ``epoch`` + 1, and the plan: field ``grow``, each range an old shard hands
to a new one) and marks the ranges: ``importing`` on each target, ``migrating`` on each source
(the target's index per slot), whose ``owns`` bits for them go off. From then on the source's
fence admits a lane of a handed range only while it holds jobs of it there, and refuses any
other toward the target, which admits it: a new lane starts on its new shard, a lane that has
jobs stays served where it is. The directory's slot table is the old one until the ranges
flip (the next part), so every producer asks the source first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from echomq.engine.keys import SLOTS
from echomq.engine.shard_schedule import MAX_SHARDS
from echomq.engine.shards import (
    Handoff,
    ShardMap,
    choose_tags,
    grow_plan,
    handoffs_from_text,
    handoffs_text,
    read_map,
    slot_owners,
)
from echomq.errors import InvalidArgument, Unsupported
from echomq.wire.connector import Arg

if TYPE_CHECKING:
    from echomq.engine.sharded import ShardedQueue

#: Wake tokens pushed on each old shard's list by a grow: that many parked consumers a shard
#: hear of it at once (the others at their next upkeep, ``idle_upkeep`` at most).
WAKES: Final = 16

#: Meta fields of shard 0 a new shard does not copy: its own identity and fencing, and the
#: quota of a queue-wide budget (a new shard starts at 0: the rebalancer gives it its share).
NOT_COPIED: Final = frozenset({"shard", "epoch", "qtoken", "noquota", "concurrency", "max"})


async def add_shards(queue: ShardedQueue, shards: int) -> bool:
    """Grow ``queue`` to ``shards`` shards, their lanes still to come (see the module). Checked
    before any write: ``shards`` an int above the count there is, at most ``MAX_SHARDS``; a
    grow to another count in progress is refused. Idempotent: called again for the grow in
    progress (a caller that stopped half way), it writes the marks again. False when the queue
    has ``shards`` shards already and no grow is in progress."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgument("shards", shards, f"must be an int from 1 to {MAX_SHARDS}")
    wire, keys = queue.wire, queue.keys
    placement = await read_map(wire, keys)
    if placement is None:
        raise InvalidArgument("shards", shards, f"queue {keys.queue!r} has no directory")
    plan = await wire.call("HGET", keys.directory, "grow")
    if plan:
        handoffs = handoffs_from_text(plan.decode())
        if placement.shards != shards:
            raise InvalidArgument(
                "shards", shards, f"a grow to {placement.shards} shards is in progress"
            )
        queue.install_placement(placement)
        await _mark(queue, handoffs, placement.epoch)
        return True
    if shards < placement.shards:
        raise Unsupported(
            f"shrinking a sharded queue ({placement.shards} to {shards} shards) is not built "
            "yet (docs/concepts/shards.md, 'Changing S')"
        )
    if shards == placement.shards:
        return False
    old = placement.shards
    _, handoffs = grow_plan(placement.table, old, shards)
    tags = choose_tags(keys.queue, shards, slot_owners(wire))
    grown = ShardMap(
        placement.tags + tags[old:], placement.table, placement.overrides, placement.epoch + 1
    )
    meta, concurrency, rate = await wire.call_many(
        [
            ("HGETALL", keys.meta),
            ("HGET", keys.directory, "concurrency"),
            ("HGET", keys.directory, "rate"),
        ]
    )
    copied = _copied(meta, budgeted="c" * bool(concurrency) + "r" * bool(rate))
    for k in range(old, shards):
        made = grown.fence_commands(k)
        if copied:
            made.append(("HSET", grown.keyspace(k).meta, *copied))
        await wire.call_many(made)
    # The directory last, as the first open writes it: a reader that finds the count finds
    # every shard made. The marks follow; a caller stopped between finds the plan and ends it.
    fields = {**grown.to_directory(), "grow": handoffs_text(handoffs), "state": "growing"}
    await wire.call("HSET", keys.directory, *[part for pair in fields.items() for part in pair])
    queue.install_placement(grown)
    await _mark(queue, handoffs, grown.epoch)
    await _wake_parked(queue, old)
    return True


async def _wake_parked(queue: ShardedQueue, old: int) -> None:
    """Tokens on the old shards' wake lists: consumers parked there (claiming only when woken)
    claim, read the directory's epoch with the loads, and park on the new shards' lists too.
    ``WAKES`` a shard, at most the list's 64 (those not woken learn at their next upkeep)."""
    for shard in queue.shards[:old]:
        await shard.wire.call_many(
            [("LPUSH", shard.keys.wake, *["1"] * WAKES), ("LTRIM", shard.keys.wake, 0, 63)]
        )


def _copied(meta: Any, *, budgeted: str) -> list[Arg]:
    """The field, value pairs of shard 0's meta a new shard starts with (``budgeted``: the
    letters of the queue-wide gates, whose quota starts at 0 there: its ``noquota``)."""
    pairs = meta.items() if isinstance(meta, dict) else zip(meta[::2], meta[1::2], strict=True)
    copied: list[Arg] = []
    for field, value in pairs:
        name = field.decode() if isinstance(field, bytes) else str(field)
        if name not in NOT_COPIED:
            copied += (name, value)
    if budgeted:
        copied += ("noquota", budgeted)
    return copied


async def _mark(queue: ShardedQueue, handoffs: Sequence[Handoff], epoch: int) -> None:
    """The ranges marked, in the order that never refuses a lane toward a shard that would
    refuse it too: every target's ``importing``, then every source's ``migrating``, then the
    sources' ``owns`` bits off (their meta ``epoch`` with them). Each write sets the whole
    value, so writing them again is harmless."""
    placement = queue.placement_map
    importing: dict[int, bytearray] = {}
    migrating: dict[int, bytearray] = {}
    for first, end, source, target in handoffs:
        bits = importing.setdefault(target, bytearray(SLOTS // 8))
        for slot in range(first, end):
            bits[slot >> 3] |= 0x80 >> (slot & 7)
        migrating.setdefault(source, bytearray(SLOTS))[first:end] = bytes([target]) * (end - first)
    shards = queue.shards
    for k, bits in importing.items():
        await shards[k].wire.call("SET", shards[k].keys.importing, bytes(bits))
    for k, targets in migrating.items():
        await shards[k].wire.call("SET", shards[k].keys.migrating, bytes(targets))
    for k, targets in migrating.items():
        owns = bytearray(placement.owns_bitmap(k))
        for slot in range(SLOTS):
            if targets[slot]:
                owns[slot >> 3] &= ~(0x80 >> (slot & 7)) & 0xFF
        keys = shards[k].keys
        await shards[k].wire.call_many(
            [("SET", keys.owns, bytes(owns)), ("HSET", keys.meta, "epoch", epoch)]
        )

"""Growing a sharded queue, its first part: new shards made empty, the settings of the lanes of
the lane-slot ranges they will take copied to them, and those ranges marked on both sides
(docs/concepts/shards.md, "Changing S", steps 1 and 2).

:func:`add_shards` makes shards S..S'-1 (tags as the first open chooses them, meta copied from
shard 0, no lane slot owned, no quota of a queue-wide budget), records them in the directory
(``count``, ``tags``, ``epoch`` + 1, and the plan: field ``grow``, each range an old shard hands
to a new one) and marks the ranges: ``importing`` on each target, ``migrating`` on each source
(the target's index per slot), whose ``owns`` bits for them go off. Before the marks, each
source's lanes of a range it hands on that have settings there (ceiling, weight, rate, cap,
policy, pause, cooling) are written to the target as the source holds them, so a new lane the
target admits before its move obeys them; from then until the flip a lane setter writes such a
lane's settings on both (``ShardedQueue.lane``, ``apply_policies``). From then on the source's
fence admits a lane of a handed range only while it holds jobs of it there, and refuses any
other toward the target, which admits it: a new lane starts on its new shard, a lane that has
jobs stays served where it is. The directory's slot table is the old one until the ranges
flip (the next part), so every producer asks the source first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from echomq.engine.checks import MAX_BATCH, count, text
from echomq.engine.keys import SLOTS
from echomq.engine.lane_move import LaneMove
from echomq.engine.queue import Queue
from echomq.engine.shard_schedule import MAX_SHARDS
from echomq.engine.sharded_lanes import copy_settings
from echomq.engine.shards import (
    Handoff,
    ShardMap,
    choose_tags,
    grow_plan,
    handed_table,
    handoffs_from_text,
    handoffs_text,
    lane_slot,
    read_map,
    slot_owners,
)
from echomq.errors import InvalidArgument, StateError, Unsupported
from echomq.wire.connector import Arg

if TYPE_CHECKING:
    from echomq.engine.sharded import ShardedQueue

#: Wake tokens pushed on each old shard's list by a grow: that many parked consumers a shard
#: hear of it at once (the others at their next upkeep, ``idle_upkeep`` at most).
WAKES: Final = 16

#: Looks at the sources' lanes (each followed by the moves it found) before a grow gives up:
#: a source admits no new lane of a range it hands on, so a second look finds none.
MOVE_PASSES: Final = 3

#: Meta fields of shard 0 a new shard does not copy: its own identity and fencing, and the
#: quota of a queue-wide budget (a new shard starts at 0: the rebalancer gives it its share).
NOT_COPIED: Final = frozenset({"shard", "epoch", "qtoken", "noquota", "concurrency", "max"})


def check_count(shards: int) -> None:
    """``shards`` an int from 1 to ``MAX_SHARDS`` (checked before the placement lease)."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgument("shards", shards, f"must be an int from 1 to {MAX_SHARDS}")


async def add_shards(queue: ShardedQueue, shards: int) -> bool:
    """Grow ``queue`` to ``shards`` shards, their lanes still to come (see the module). Checked
    before any write: ``shards`` an int above the count there is, at most ``MAX_SHARDS``; a
    grow to another count in progress is refused. Idempotent: called again for the grow in
    progress (a caller that stopped half way), it writes the marks again. False when the queue
    has ``shards`` shards already and no grow is in progress."""
    check_count(shards)
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
        await copy_settings(queue, handoffs)
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
    # every shard made (and a lane setter, the plan: it writes a handed lane's settings on both
    # shards from now on). The settings' copy and the marks follow; a caller stopped between
    # finds the plan and ends it.
    fields = {**grown.to_directory(), "grow": handoffs_text(handoffs), "state": "growing"}
    await wire.call("HSET", keys.directory, *[part for pair in fields.items() for part in pair])
    queue.install_placement(grown)
    await copy_settings(queue, handoffs)
    await _mark(queue, handoffs, grown.epoch)
    await _wake_parked(queue, old)
    return True


async def grow(queue: ShardedQueue, shards: int, *, batch: int) -> bool:
    """Grow ``queue`` to ``shards`` shards online: :func:`add_shards`, then each lane a source
    still holds in a range it hands on moved to the range's target (``LaneMove``, ``batch``
    jobs at a time), then the flip. Every step is recorded (the directory's plan, the marks,
    each move's own), so a grow that stopped is finished by calling this again. False when the
    queue had ``shards`` shards already and no grow was in progress."""
    count(batch, "batch", maximum=MAX_BATCH)  # before add_shards writes anything
    began = await add_shards(queue, shards)
    wire, keys = queue.wire, queue.keys
    plan = await wire.call("HGET", keys.directory, "grow")
    if not plan:
        await _clear_marks(queue)  # a flip that stopped after the directory: its marks
        return began
    handoffs = handoffs_from_text(plan.decode())
    for _ in range(MOVE_PASSES):
        held = await _held_lanes(queue, handoffs)
        if not held:
            break
        for lane, target in held:  # under the grow's placement lease: not move_lane's own
            await LaneMove(queue, lane, target, batch=batch).run()
    else:
        raise StateError(
            f"EMQSTATE grow of {keys.queue!r}: its sources still hold lanes of the ranges they "
            f"hand on after {MOVE_PASSES} passes of moves; call grow again"
        )
    await _flip(queue, handoffs)
    return True


async def _held_lanes(queue: ShardedQueue, handoffs: Sequence[Handoff]) -> list[tuple[str, int]]:
    """The lanes of the handed ranges their sources still hold (jobs pending, leased or
    scheduled there, or settings: the move carries those too), each with the shard to move it
    to: its target, or, for a lane the source froze toward a shard (``moved``), that shard — a
    move that stopped (this grow's, or a ``move_lane`` whose lease lapsed: the grow holds it
    now) is finished where it was going before the flip (skipped, it stayed frozen on the
    source and held on its target for good). A move stopped after its first step (the lane
    held on a shard, ``adopted`` naming this source, not yet frozen here) is found there: the
    mover refuses any other target for it while it is begun."""
    found: list[tuple[str, int]] = []
    for source in sorted({h[2] for h in handoffs}):
        mine = [h for h in handoffs if h[2] == source]
        shard = queue.shards[source]
        moved = await shard.wire.call("HGETALL", shard.keys.moved)
        gone = {text(lane): int(text(to)) for lane, to in moved.items()}
        lanes: list[tuple[str, int]] = []
        for info in await Queue.lanes(shard):
            slot = lane_slot(info.lane)
            target = next((h[3] for h in mine if h[0] <= slot < h[1]), None)
            if target is not None:
                lanes.append((info.lane, target))
        if not lanes:
            continue
        held = await asyncio.gather(
            *(
                other.wire.call_many([("HGET", other.keys.adopted, lane) for lane, _ in lanes])
                for other in queue.shards
            )
        )
        for i, (lane, target) in enumerate(lanes):
            begun = [k for k, marks in enumerate(held) if text(marks[i] or b"") == str(source)]
            found.append((lane, gone.get(lane, begun[0] if begun else target)))
    return found


async def _flip(queue: ShardedQueue, handoffs: Sequence[Handoff]) -> None:
    """The ranges become their targets', in the order that never leaves a producer without a
    shard that admits: the targets' ``owns`` on, the directory's table and epoch (plan and
    state gone), then the sources' ``migrating`` and the targets' ``importing`` deleted."""
    wire, keys = queue.wire, queue.keys
    placement = await read_map(wire, keys)
    assert placement is not None
    flipped = ShardMap(
        placement.tags,
        handed_table(placement.table, handoffs),
        placement.overrides,
        placement.epoch + 1,
    )
    for k in sorted({h[3] for h in handoffs}):
        shard = queue.shards[k]
        await shard.wire.call_many(
            [
                ("SET", shard.keys.owns, flipped.owns_bitmap(k)),
                ("HSET", shard.keys.meta, "epoch", flipped.epoch),
            ]
        )
    fields = flipped.to_directory()
    await wire.call_many(
        [
            ("HSET", keys.directory, *[part for pair in fields.items() for part in pair]),
            ("HDEL", keys.directory, "grow", "state"),
        ]
    )
    queue.install_placement(flipped)
    await _drop_marks(queue, flipped.epoch)  # the directory's epoch: just written, under the lease


async def _clear_marks(queue: ShardedQueue) -> None:
    """:func:`_drop_marks` at the directory's epoch (read now: this queue's map may be older)."""
    placement = await read_map(queue.wire, queue.keys)
    if placement is not None and placement.epoch > queue.placement_map.epoch:
        queue.install_placement(placement)
    await _drop_marks(queue, queue.placement_map.epoch)


async def _drop_marks(queue: ShardedQueue, epoch: int) -> None:
    """Every shard's ``migrating`` and ``importing`` deleted (the sources' first), with its
    meta ``epoch`` set to ``epoch`` (the directory's)."""
    for key in ("migrating", "importing"):
        for shard in queue.shards:
            await shard.wire.call_many(
                [
                    ("DEL", getattr(shard.keys, key)),
                    ("HSET", shard.keys.meta, "epoch", epoch),
                ]
            )


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

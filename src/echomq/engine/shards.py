"""Where a sharded queue's lanes live and what its shards are called: the lane-slot function,
the tags of the shards (spread over a cluster's primaries), and ``ShardMap``, the value the
directory stores (docs/concepts/shards.md, "Names and tags" and "Lane placement").

Pure: no I/O. A lane's shard is its override if it has one, else the shard whose run of the
slot table holds its lane slot; the shards' own fence (``owns``, ``moved``, ``adopted``) is the
authority, and this map is what producers cache and operators read.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Final, TypeGuard, TypeVar

from echomq.engine.keys import (
    MAX_NONCE,
    SHARD_MARK,
    SLOTS,
    Keyspace,
    crc16,
    parse_shard_tag,
    shard_tag,
    validate_group,
    validate_queue,
)
from echomq.engine.options import Fence, fence
from echomq.engine.shard_schedule import MAX_SHARDS
from echomq.errors import InvalidArgument
from echomq.wire.connector import Arg
from echomq.wire.pool import Wire

#: A run of the slot table: (its first lane slot, its shard); it ends where the next begins.
Run = tuple[int, int]
#: Sends of an item after a shard refused it as moved (``EMQMOVED``), each where the directory,
#: read again, or the refusal says the lane went: a producer a move or two behind follows the
#: lane through a move in progress (moves run one at a time, under the placement lease).
MOVE_HOPS: Final = 3

_V = TypeVar("_V")

_FIRST: Final = itemgetter(0)  # a run's first slot, an override's lane: what bisect compares


def lane_slot(lane: str) -> int:
    """The lane slot of ``lane``: CRC16 of its whole UTF-8 name mod 16384, the cluster's own
    function (no hash tag is looked for). Lane slots only place lanes; they never name a key."""
    return crc16(validate_group(lane).encode()) % SLOTS


def _check_count(shards: object) -> int:
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgument("shards", shards, f"must be an int from 1 to {MAX_SHARDS}")
    return shards


def initial_table(shards: int) -> tuple[Run, ...]:
    """The slot table of a new queue of ``shards`` shards: shard k owns the lane slots from
    16384·k // shards up to (not including) 16384·(k+1) // shards, so run sizes differ by 1 at
    most and growing moves whole ranges."""
    count = _check_count(shards)
    return tuple((SLOTS * k // count, k) for k in range(count))


#: A range of lane slots handed on while the shard count grows: (first, end, source, target),
#: the slots first .. end - 1 going from shard ``source`` to the new shard ``target``.
Handoff = tuple[int, int, int, int]


def grow_plan(
    table: Sequence[Run], shards: int, grown: int
) -> tuple[tuple[Run, ...], tuple[Handoff, ...]]:
    """The slot table of a queue grown from ``shards`` to ``grown`` shards, and the ranges each
    old shard hands to each new one (docs/concepts/shards.md, "Changing S"). Each old shard k
    keeps the first 16384·(k+1)//grown − 16384·k//grown of its slots (or all it has, when it has
    fewer) and hands the rest, so a lane that stays never moves; the handed ranges are dealt to
    the new shards in order, each its 1/``grown`` share (the last the remainder)."""
    count = _check_count(shards)
    wanted = _check_count(grown)
    if wanted <= count:
        raise InvalidArgument("shards", grown, f"must be more than the {count} shards there are")
    runs = _checked_table(table, count)
    ends = [first for first, _ in runs[1:]] + [SLOTS]
    share = [SLOTS * (k + 1) // wanted - SLOTS * k // wanted for k in range(wanted)]
    given: list[tuple[int, int, int]] = []  # (first, end, source), each source's in slot order
    for k in range(count):
        keep = share[k]
        for (first, owner), end in zip(runs, ends, strict=True):
            if owner != k:
                continue
            kept = min(keep, end - first)
            keep -= kept
            if first + kept < end:
                given.append((first + kept, end, k))
    handoffs: list[Handoff] = []
    target, room = count, share[count]
    for first, end, source in given:
        while first < end:
            while room == 0 and target < wanted - 1:
                target += 1
                room = share[target]
            take = end - first if target == wanted - 1 else min(room, end - first)
            handoffs.append((first, first + take, source, target))
            first += take
            room -= take
    return handed_table(runs, handoffs), tuple(handoffs)


def handed_table(table: Sequence[Run], handoffs: Iterable[Handoff]) -> tuple[Run, ...]:
    """The slot table ``table`` becomes once each handoff's range belongs to its target."""
    ends = [first for first, _ in table[1:]] + [SLOTS]
    owners = [0] * SLOTS
    for (first, owner), end in zip(table, ends, strict=True):
        owners[first:end] = [owner] * (end - first)
    for first, end, _, target in handoffs:
        owners[first:end] = [target] * (end - first)
    runs = [(0, owners[0])]
    for slot in range(1, SLOTS):
        if owners[slot] != owners[slot - 1]:
            runs.append((slot, owners[slot]))
    return tuple(runs)


def handoffs_text(handoffs: Iterable[Handoff]) -> str:
    """The directory's ``grow`` field: each handoff as ``first:end:source:target``."""
    return " ".join(":".join(str(part) for part in handoff) for handoff in handoffs)


def handoffs_from_text(text: str) -> tuple[Handoff, ...]:
    """The handoffs a directory's ``grow`` field holds (``handoffs_text`` read back)."""
    found: list[Handoff] = []
    for word in text.split():
        parts = word.split(":")
        if len(parts) != 4:
            raise InvalidArgument("directory", text, "a handoff must be first:end:source:target")
        first, end, source, target = (_number("directory", part) for part in parts)
        if not 0 <= first < end <= SLOTS:
            raise InvalidArgument("directory", text, f"handoff {word} is not within 0..16384")
        found.append((first, end, source, target))
    return tuple(found)


def _address_order(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else (address, -1)


def choose_tags(queue: str, shards: int, owners: Sequence[str] | None = None) -> tuple[str, ...]:
    """The tags of a new queue's ``shards`` shards. ``owners`` is the cluster's slot map, the
    address of each slot's primary (``""`` for a slot none serves); None on one server, where
    shard k is ``q~k``. On a cluster shard k's tag is the first of ``q~k``, ``q~k.1``, … whose
    slot the primary k + p mod P serves (p: the primary of ``{q}``, primaries in address order),
    so the shards spread evenly over the primaries. Chosen once: the directory keeps them."""
    validate_queue(queue)
    count = _check_count(shards)
    if owners is None:
        return tuple(shard_tag(queue, k) for k in range(count))
    if isinstance(owners, str | bytes) or not isinstance(owners, Sequence):
        raise InvalidArgument("owners", owners, "must be a sequence of addresses, one per slot")
    if len(owners) != SLOTS or not all(isinstance(address, str) for address in owners):
        raise InvalidArgument("owners", owners, f"must be {SLOTS} str addresses, one per slot")
    home = owners[crc16(queue.encode()) % SLOTS]
    if not home:
        raise InvalidArgument("owners", owners, f"no primary serves the slot of queue {queue!r}")
    primaries = sorted({address for address in owners if address}, key=_address_order)
    first = primaries.index(home)
    tags = [queue]
    for k in range(1, count):
        wanted = primaries[(first + k) % len(primaries)]
        tag = _tag_served_by(owners, f"{queue}{SHARD_MARK}{k}", wanted)
        if tag is None:
            raise InvalidArgument("owners", owners, f"no tag of shard {k} lands on {wanted}")
        tags.append(tag)
    return tuple(tags)


def _tag_served_by(owners: Sequence[str], stem: str, wanted: str) -> str | None:
    """The first of ``stem``, ``stem.1``, ``stem.2``, … whose slot ``wanted`` serves."""
    for nonce in range(MAX_NONCE):
        tag = f"{stem}.{nonce}" if nonce else stem
        if owners[crc16(tag.encode()) % SLOTS] == wanted:
            return tag
    return None


def _int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _sequence(argument: str, value: object) -> tuple[object, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidArgument(argument, value, "must be a sequence")
    return tuple(value)


def _pair(argument: str, value: object, i: int) -> tuple[object, object]:
    if not isinstance(value, tuple) or len(value) != 2:
        raise InvalidArgument(argument, value, f"item {i} must be a pair")
    return value[0], value[1]


def _checked_tags(tags: object) -> tuple[str, ...]:
    found = _sequence("tags", tags)
    if not 1 <= len(found) <= MAX_SHARDS:
        raise InvalidArgument("tags", tags, f"must hold 1 to {MAX_SHARDS} tags")
    checked: list[str] = []
    for k, tag in enumerate(found):
        queue, index = parse_shard_tag(tag)
        if index != k or (checked and queue != checked[0]):
            raise InvalidArgument("tags", tags, f"tag {k} ({tag!r}) is not shard {k}'s")
        checked.append(queue if k == 0 else str(tag))
    return tuple(checked)


def _checked_table(table: object, shards: int) -> tuple[Run, ...]:
    runs: list[Run] = []
    for i, item in enumerate(_sequence("table", table)):
        first, shard = _pair("table", item, i)
        if not _int(first) or not _int(shard):
            raise InvalidArgument("table", table, f"run {i} must be two ints")
        if not 0 <= shard < shards:
            raise InvalidArgument("table", table, f"run {i} names shard {shard} of {shards}")
        if not (runs[-1][0] if runs else -1) < first < SLOTS:
            raise InvalidArgument("table", table, f"run {i} does not ascend within 0..16383")
        if runs and runs[-1][1] == shard:
            raise InvalidArgument("table", table, f"runs {i - 1} and {i} are both shard {shard}'s")
        runs.append((first, shard))
    if not runs or runs[0][0] != 0:
        raise InvalidArgument("table", table, "must start with a run at lane slot 0")
    return tuple(runs)


def _checked_overrides(overrides: object, shards: int) -> tuple[tuple[str, int], ...]:
    checked: dict[str, int] = {}
    for i, item in enumerate(_sequence("overrides", overrides)):
        lane, shard = _pair("overrides", item, i)
        try:
            validate_group(lane)
        except InvalidArgument as refused:
            raise InvalidArgument("overrides", overrides, f"lane {i}: {refused.reason}") from None
        if not isinstance(lane, str) or not _int(shard) or not 0 <= shard < shards:
            raise InvalidArgument("overrides", overrides, f"lane {lane!r}: no shard {shard!r}")
        if lane in checked:
            raise InvalidArgument("overrides", overrides, f"lane {lane!r} is named twice")
        checked[lane] = shard
    return tuple(sorted(checked.items()))


@dataclass(frozen=True, slots=True)
class ShardMap:
    """A sharded queue's placement, as its directory stores it (``to_directory`` and
    ``to_placed``, read back by ``from_stored``).

    ``tags``: each shard's hash tag, shard 0's the queue's own name. ``table``: the slot table
    as runs ``(first lane slot, shard)``, the first at 0, ascending, no two neighbours on one
    shard. ``overrides``: ``(lane, shard)`` for the lanes moved off the shard their slot names,
    sorted by lane. ``epoch``: the placement epoch, 1 at creation, one more at each change.
    Construction validates all of it (``InvalidArgument`` names the field).
    """

    tags: tuple[str, ...]
    table: tuple[Run, ...]
    overrides: tuple[tuple[str, int], ...] = ()
    epoch: int = 1

    def __post_init__(self) -> None:
        tags = _checked_tags(self.tags)
        table = _checked_table(self.table, len(tags))
        overrides = _checked_overrides(self.overrides, len(tags))
        if not _int(self.epoch) or self.epoch < 1:
            raise InvalidArgument("epoch", self.epoch, "must be an int >= 1")
        object.__setattr__(self, "tags", tags)
        object.__setattr__(self, "table", table)
        object.__setattr__(self, "overrides", overrides)

    @classmethod
    def create(cls, queue: str, shards: int, owners: Sequence[str] | None = None) -> ShardMap:
        """A new queue's map: tags from ``choose_tags``, the ``initial_table``, no overrides."""
        return cls(choose_tags(queue, shards, owners), initial_table(shards))

    @property
    def queue(self) -> str:
        """The queue's name: shard 0's tag."""
        return self.tags[0]

    @property
    def shards(self) -> int:
        """How many shards the queue has."""
        return len(self.tags)

    def owner(self, slot: int) -> int:
        """The shard the slot table gives lane slot ``slot`` to."""
        if not _int(slot) or not 0 <= slot < SLOTS:
            raise InvalidArgument("lane slot", slot, f"must be an int from 0 to {SLOTS - 1}")
        return self.table[bisect_right(self.table, slot, key=_FIRST) - 1][1]

    def shard_of(self, lane: str) -> int:
        """The shard ``lane`` lives on: its override, else the owner of its lane slot."""
        slot = lane_slot(lane)
        i = bisect_left(self.overrides, lane, key=_FIRST)
        if i < len(self.overrides) and self.overrides[i][0] == lane:
            return self.overrides[i][1]
        return self.owner(slot)

    def slots_of(self, shard: int) -> tuple[range, ...]:
        """The runs of lane slots the table gives ``shard``, in order."""
        self._check_shard(shard)
        ends = [first for first, _ in self.table[1:]] + [SLOTS]
        return tuple(
            range(first, end)
            for (first, owner), end in zip(self.table, ends, strict=True)
            if owner == shard
        )

    def owns_bitmap(self, shard: int) -> bytes:
        """Shard ``shard``'s ``owns`` key as Valkey stores it: 2,048 bytes, bit ``s`` set (as
        ``GETBIT owns s`` reads it: byte s // 8, most significant bit first) for each lane slot
        ``s`` the table gives it."""
        bits = bytearray(SLOTS // 8)
        for run in self.slots_of(shard):
            for slot in run:
                bits[slot >> 3] |= 0x80 >> (slot & 7)
        return bytes(bits)

    def keyspace(self, shard: int) -> Keyspace:
        """The keyspace of shard ``shard``: every script runs on it unchanged."""
        self._check_shard(shard)
        return Keyspace.for_shard(self.tags[shard])

    def fence(self, lanes: Iterable[str]) -> Fence:
        """The fence a producer holding this map sends with the items of ``lanes`` (one lane
        per item, in order): its epoch and each lane's slot (docs/concepts/shards.md, "The
        fence"). ``InvalidArgument`` names a lane that is not a lane name."""
        return fence(self.epoch, (lane_slot(lane) for lane in lanes))

    def fence_commands(self, shard: int) -> list[tuple[Arg, ...]]:
        """The writes that make the keyspace of shard ``shard`` the shard this map describes:
        its ``owns`` bitmap, its meta ``shard`` and ``epoch``, and its ``moved`` / ``adopted``
        lanes from the overrides (a lane moved off shard s is in s's ``moved``, naming its new
        shard, and in that shard's ``adopted``), the old ones replaced. Idempotent; not one
        atomic step, so meant for a shard nothing admits to yet (its creation) and tests."""
        keys = self.keyspace(shard)
        moved: list[Arg] = []
        adopted: list[Arg] = []
        for lane, to in self.overrides:
            home = self.owner(lane_slot(lane))
            if home == to:
                continue  # an override that names the slot's own shard fences nothing
            if home == shard:
                moved += (lane, to)
            elif to == shard:
                adopted += (lane, "")
        commands: list[tuple[Arg, ...]] = [
            ("SET", keys.owns, self.owns_bitmap(shard)),
            ("HSET", keys.meta, "shard", shard, "epoch", self.epoch),
            ("DEL", keys.moved, keys.adopted),
        ]
        if moved:
            commands.append(("HSET", keys.moved, *moved))
        if adopted:
            commands.append(("HSET", keys.adopted, *adopted))
        return commands

    def to_directory(self) -> dict[str, str]:
        """The fields of the directory (HASH ``emq:{q}:shards``, on shard 0) this map sets."""
        return {
            "count": str(self.shards),
            "epoch": str(self.epoch),
            "tags": " ".join(self.tags),
            "table": " ".join(f"{first}:{shard}" for first, shard in self.table),
        }

    def to_placed(self) -> dict[str, str]:
        """The overrides (HASH ``emq:{q}:placed``, on shard 0): lane -> shard."""
        return {lane: str(shard) for lane, shard in self.overrides}

    @classmethod
    def from_stored(
        cls,
        directory: Mapping[bytes, bytes] | Mapping[str, str],
        placed: Mapping[bytes, bytes] | Mapping[str, str] | None = None,
    ) -> ShardMap:
        """The map a directory and its overrides hold, as read (bytes, or str). Fields this map
        does not know (the budgets, a move in progress) are left to their readers."""
        fields = {_text("directory", k): _text("directory", v) for k, v in directory.items()}
        missing = [name for name in ("count", "epoch", "tags", "table") if name not in fields]
        if missing:
            raise InvalidArgument("directory", directory, f"has no field {missing[0]!r}")
        tags = tuple(fields["tags"].split(" "))
        if fields["count"] != str(len(tags)):
            raise InvalidArgument("directory", directory, "its count is not how many tags it has")
        table = tuple(_number_pair("directory", run) for run in fields["table"].split(" "))
        overrides = tuple(
            (_text("placed", lane), _number("placed", _text("placed", shard)))
            for lane, shard in (placed or {}).items()
        )
        return cls(tags, table, overrides, _number("directory", fields["epoch"]))

    def _check_shard(self, shard: int) -> None:
        if not _int(shard) or not 0 <= shard < self.shards:
            raise InvalidArgument("shard", shard, f"must be an int from 0 to {self.shards - 1}")


def _text(argument: str, value: object) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise InvalidArgument(argument, value, "holds bytes that are not UTF-8") from None
    if not isinstance(value, str):
        raise InvalidArgument(
            argument, value, f"must hold bytes or str, got {type(value).__name__}"
        )
    return value


def _number(argument: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise InvalidArgument(argument, text, "must be a decimal integer")
    return int(text)


def _number_pair(argument: str, text: str) -> Run:
    first, sep, shard = text.partition(":")
    if not sep:
        raise InvalidArgument(argument, text, "a table run must be first:shard")
    return _number(argument, first), _number(argument, shard)


def check_shards(shards: object) -> int:
    """A sharded queue's shard count, checked (``InvalidArgument`` names ``shards``)."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgument("shards", shards, f"must be an int from 1 to {MAX_SHARDS}")
    return shards


async def read_map(wire: Wire, keys: Keyspace) -> ShardMap | None:
    """The map the directory of queue ``keys`` holds (one round trip), None when it has none."""
    directory, placed = await wire.call_many(
        [("HGETALL", keys.directory), ("HGETALL", keys.placed)]
    )
    return stored_map(directory, placed)


def stored_map(directory: Any, placed: Any) -> ShardMap | None:
    """The map of the directory's and the placements' ``HGETALL`` replies (the blocking
    producer reads them on its own socket), None when the queue has no directory."""
    if not directory:
        return None
    return ShardMap.from_stored(_fields(directory), _fields(placed))


def handed_to(handoffs: Sequence[Handoff], source: int, lane: str) -> int | None:
    """The shard a grow hands ``lane`` to, when ``source`` serves it and hands its slot on."""
    slot = lane_slot(lane)
    return next((h[3] for h in handoffs if h[2] == source and h[0] <= slot < h[1]), None)


def lanes_by_shard(
    named: Mapping[str, _V], placement: ShardMap, handoffs: Sequence[Handoff]
) -> list[dict[str, _V]]:
    """``named`` (a value per lane: a lane setting) split by the shards it is written to: each
    lane's own, then, while a grow hands its range on, the range's target too; every shard of
    ``placement`` has its part (empty for none), in shard order."""
    parts: list[dict[str, _V]] = [{} for _ in placement.tags]
    for lane, value in named.items():
        k = placement.shard_of(lane)
        parts[k][lane] = value
        target = handed_to(handoffs, k, lane)
        if target is not None:
            parts[target][lane] = value
    return parts


def stored_handoffs(directory: Any) -> tuple[Handoff, ...]:
    """The ranges a grow in progress hands on, from the directory's ``HGETALL`` reply (none:
    no grow)."""
    plan = _fields(directory).get(b"grow") if directory else None
    return handoffs_from_text(plan.decode()) if plan else ()


def _fields(reply: Any) -> dict[bytes, bytes]:
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


def slot_owners(wire: Wire) -> list[str] | None:
    """The cluster's slot map (each slot's primary address) when ``wire`` is a cluster router,
    as ``ShardMap.create`` takes it; None on one server."""
    owner = getattr(wire, "owner", None)
    if owner is None:
        return None
    return [owner(s).address for s in range(SLOTS)]

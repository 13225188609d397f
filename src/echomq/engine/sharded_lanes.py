"""A lane's settings on a sharded queue while a grow hands its range on (docs/concepts/shards.md,
"Changing S", step 2): copied from its source to the range's target before the range is marked
(:func:`copy_settings`), then written on both by the lane's control handle
(:class:`ShardedLane`: its reads on the lane's shard, its setters where the lane is served and
on the range's target) and by ``apply_policies``, so a job of the lane the target admits before
the lane's move obeys them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from echomq.engine.checks import text
from echomq.engine.lanes import Lane
from echomq.engine.policies import DEFAULT_MODE, RateMode
from echomq.engine.queue import Queue
from echomq.engine.shards import Handoff, handed_to
from echomq.wire.connector import Arg

if TYPE_CHECKING:
    from echomq.engine.sharded import ShardedQueue


#: The hashes of a lane's own settings on a shard (its pause is the ``paused`` set), in the
#: order the copy reads them (``lane_settings.lua`` takes the pause before the cooling).
SETTING_KEYS: Final = ("glimit", "gweight", "grate", "gcap", "policies", "cooling")

#: Lanes whose settings one ``lane_settings.lua`` call writes.
SETTINGS_BATCH: Final = 100

#: Reads of a batch's settings after its write before the copy lets a setter finish it.
COPY_ROUNDS: Final = 3


class ShardedLane(Lane):
    """:class:`Lane` of a sharded queue: the reads on the lane's shard (as the handle was made),
    each setter on every shard ``ShardedQueue.lane_shards`` names, the lane's own first (a
    grow's copy reads it there after writing the target, so a setter's write is never undone).
    True when any of them changed."""

    def __init__(self, queue: ShardedQueue, shard: Queue, lane: str) -> None:
        super().__init__(shard.engine, shard.keys, lane)  # the reads: the lane's shard
        self._queue = queue

    async def _each(self, verb: Callable[[Lane], Awaitable[bool]]) -> bool:
        changed = False
        written: list[Queue] = []
        shards = await self._queue.lane_shards(self.lane)
        while shards:
            for shard in shards:
                # The target's handle publishes nothing: the lane's events are its own shard's.
                # (Queue's lane: shard 0 is the sharded queue itself.)
                own = Queue.lane(shard, self.lane)
                handle = Lane(shard.engine, shard.keys, self.lane) if written else own
                changed = await verb(handle) or changed
                written.append(shard)
            # A grow that began after the directory was read copied the lane's settings before
            # this write reached its source: the target is written too (read after the write).
            shards = [s for s in await self._queue.lane_shards(self.lane) if s not in written]
        return changed

    async def pause(self) -> bool:
        return await self._each(Lane.pause)

    async def resume(self) -> bool:
        return await self._each(Lane.resume)

    async def cool(self, seconds: float | None = None, *, until: float | None = None) -> bool:
        return await self._each(lambda lane: lane.cool(seconds, until=until))

    async def uncool(self) -> bool:
        return await self._each(Lane.uncool)

    async def limit(self, ceiling: int | None) -> bool:
        return await self._each(lambda lane: lane.limit(ceiling))

    async def weight(self, weight: int | None) -> bool:
        return await self._each(lambda lane: lane.weight(weight))

    async def rate(
        self, max: int | None, window: float | None = None, *, mode: RateMode = DEFAULT_MODE
    ) -> bool:
        return await self._each(lambda lane: lane.rate(max, window, mode=mode))

    async def cap(self, cap: int | None) -> bool:
        return await self._each(lambda lane: lane.cap(cap))


async def copy_settings(queue: ShardedQueue, handoffs: Sequence[Handoff]) -> None:
    """Each source's lanes of the ranges it hands on that have settings there, theirs written
    on their target (``lane_settings.lua``), ``SETTINGS_BATCH`` lanes a call. A lane the source
    froze or gave away already (its ``moved``) is the move's: skipped. A setter writes the source
    first, then the target, so each batch is read again after its write and written again
    until the read matches: a setter's write between the read and the write is not undone."""
    for source in sorted({h[2] for h in handoffs}):
        shard = queue.shards[source]
        gone = {text(lane) for lane in await shard.wire.call("HKEYS", shard.keys.moved)}
        by_target: dict[int, list[str]] = {}
        for lane in sorted(await _lanes_with_settings(shard) - gone):
            target = handed_to(handoffs, source, lane)
            if target is not None:
                by_target.setdefault(target, []).append(lane)
        for target, lanes in sorted(by_target.items()):
            for i in range(0, len(lanes), SETTINGS_BATCH):
                await _copy_lanes(queue, shard, queue.shards[target], lanes[i : i + SETTINGS_BATCH])


async def _lanes_with_settings(shard: Queue) -> set[str]:
    """The lanes that have a setting of their own on ``shard``: an ``HSCAN`` of each settings
    hash and an ``SSCAN`` of its paused lanes, 1,000 at a time."""
    keys = shard.keys
    found: set[str] = set()
    for key in (*(getattr(keys, name) for name in SETTING_KEYS), keys.paused):
        scan = "SSCAN" if key == keys.paused else "HSCAN"
        cursor = "0"
        while True:
            cursor, part = await shard.wire.call(scan, key, cursor, "COUNT", 1000)
            found.update(text(name) for name in (part if scan == "SSCAN" else part[::2]))
            if text(cursor) == "0":
                break
    return found


async def _copy_lanes(queue: ShardedQueue, source: Queue, target: Queue, lanes: list[str]) -> None:
    """``lanes``' settings read on ``source`` and written on ``target``, until a read after the
    write finds them as written (``COPY_ROUNDS`` at most: a setter outpacing it still writes the
    target itself)."""
    registry = queue.scripts
    keys = source.keys
    read = [
        command
        for lane in lanes
        for command in (
            *(("HGET", getattr(keys, name), lane) for name in SETTING_KEYS),
            ("SISMEMBER", keys.paused, lane),
        )
    ]
    width = len(SETTING_KEYS) + 1
    written: list[Any] = []
    for _ in range(COPY_ROUNDS):
        values = await source.wire.call_many(read)
        if values == written:
            return
        args: list[Arg] = []
        for i, lane in enumerate(lanes):
            limit, weight, rate, cap, policy, cooling, paused = values[i * width : (i + 1) * width]
            args += [lane, *(text(v or b"") for v in (limit, weight, rate, cap, policy))]
            args += ["1" if int(paused) else "", text(cooling or b"")]
        await registry.run(
            target.wire,
            registry.scripts["lane_settings"],
            (target.keys.root, target.keys.gate),
            args,
        )
        written = values

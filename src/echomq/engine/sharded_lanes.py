"""A lane's control handle on a sharded queue: its reads on the lane's shard, its settings
written where the lane is served — and, while a grow hands the lane's range on, on the range's
target too, so a job of the lane the target admits before the lane's move obeys them
(docs/concepts/shards.md, "Changing S", step 2)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from echomq.engine.lanes import Lane
from echomq.engine.policies import DEFAULT_MODE, RateMode
from echomq.engine.queue import Queue
from echomq.engine.shards import Handoff, lane_slot

if TYPE_CHECKING:
    from echomq.engine.sharded import ShardedQueue


def handed_to(handoffs: tuple[Handoff, ...], source: int, lane: str) -> int | None:
    """The shard a grow hands ``lane`` to, when ``source`` serves it and hands its slot on."""
    slot = lane_slot(lane)
    return next((h[3] for h in handoffs if h[2] == source and h[0] <= slot < h[1]), None)


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
        for i, shard in enumerate(await self._queue.lane_shards(self.lane)):
            # The target's handle publishes nothing: the lane's events are its own shard's.
            # (Queue's lane: shard 0 is the sharded queue itself.)
            own = Queue.lane(shard, self.lane)
            handle = Lane(shard.engine, shard.keys, self.lane) if i else own
            changed = await verb(handle) or changed
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

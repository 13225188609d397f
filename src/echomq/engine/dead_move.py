"""A dead job reprocessed on a sharded queue where its lane is served now (docs/concepts/shards.md,
"Dead jobs after a move"): dead jobs stay on the shard they died on when their lane moves (or is
handed on by a grow), so a reprocess there would ring the lane on a shard that no longer serves
it. The shard's fence refuses it instead (reprocess.lua) and the job is copied to the lane's
shard as pending, then deleted where it died (dead_move.lua): copy before delete, the copy
idempotent, so a stop between the two loses nothing, and the next reprocess finishes it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from echomq.engine import ids as _ids
from echomq.engine.checks import text
from echomq.engine.queue import Queue
from echomq.engine.shards import lane_slot
from echomq.errors import LaneMoved, server_error

if TYPE_CHECKING:
    from echomq.engine.scripts import ScriptRegistry
    from echomq.engine.shards import ShardMap


class DeadMoves:
    """A sharded queue's reprocess, on the shard that serves the dead job's lane."""

    shards: tuple[Queue, ...]
    placement_map: ShardMap
    scripts: ScriptRegistry

    if TYPE_CHECKING:  # the sharded queue's own (declared only: a definition would hide them)

        async def _current(self) -> None: ...

        async def _moved_to(self, moved: LaneMoved, lane: str) -> int: ...

    async def reprocess(self, id: str) -> bool:
        """Reprocess dead job ``id`` on the shard that serves its lane: where it died when
        that shard still does, else copied there and deleted where it died (docs/concepts/
        shards.md, "Dead jobs after a move"). A job dead on no shard is answered by the shard
        that holds it (``StateError`` for a live job, False for none)."""
        _ids.validate(id, "JOB", "job id")
        await self._current()
        rows = await asyncio.gather(
            *(s.wire.call("HMGET", s.keys.job(id), "state", "group") for s in self.shards)
        )
        dead = [
            k for k, (state, _) in enumerate(rows) if state is not None and text(state) == "dead"
        ]
        if not dead:  # the shard whose row it is (the rows just read say), else shard 0
            held = next((k for k, (state, _) in enumerate(rows) if state is not None), 0)
            return await Queue.reprocess(self.shards[held], id)
        lane = text(rows[dead[0]][1] or "_")
        # Dead on two shards (a reprocess stopped between its copy and its delete, then the
        # copy died too): the lane's shard first, where the job is revived; the other row
        # is the stale one, deleted as a copy's source is. Else the stale row was taken, its
        # copy found the dead row on the lane's shard and wrote nothing: True, still dead.
        home = self.placement_map.shard_of(lane)
        dead.sort(key=lambda k: k != home)
        k = dead[0]
        source = self.shards[k]
        reply = await source.engine.reprocess_fenced(id, self.placement_map.fence((lane,)))
        if not isinstance(reply, list):
            for stale in dead[1:] if reply else ():
                attempts = await self.shards[stale].wire.call(
                    "HGET", self.shards[stale].keys.job(id), "attempts"
                )
                await self._dead_move(self.shards[stale], ("drop", id, attempts))
            return bool(reply)
        refusal, row, log, ttl = reply
        moved = server_error(text(refusal))
        assert isinstance(moved, LaneMoved), moved
        to = await self._moved_to(moved, lane)
        try:
            await self._copy_dead(to, id, lane, row, log, ttl)
        except LaneMoved as again:  # moved once more meanwhile: where the refusal says
            to = await self._moved_to(again, lane)
            await self._copy_dead(to, id, lane, row, log, ttl)
        attempts = _field(row, "attempts")
        await self._dead_move(source, ("drop", id, attempts))
        return True

    async def _copy_dead(
        self, to: int, id: str, lane: str, row: list[Any], log: list[Any], ttl: Any
    ) -> None:
        """The dead row written on shard ``to`` as reprocessed (a copy there already: nothing)."""
        epoch = self.placement_map.epoch
        args = ("in", epoch, id, lane_slot(lane), ttl, len(row), *row, *log)
        await self._dead_move(self.shards[to], args)

    def _dead_move(self, shard: Queue, args: tuple[Any, ...]) -> Any:
        registry = self.scripts
        keys = (shard.keys.root, shard.keys.gate)
        return registry.run(shard.wire, registry.scripts["dead_move"], keys, args)


def _field(row: list[Any], name: str) -> Any:
    """Field ``name`` of a row read as ``HGETALL`` pairs (None when absent)."""
    for field, value in zip(row[::2], row[1::2], strict=True):
        if text(field) == name:
            return value
    return None

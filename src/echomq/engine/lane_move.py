"""Moving one lane between shards of a sharded queue (docs/concepts/shards.md, "Moving a lane"):
the target adopts the lane held, the source freezes it, its leases drain, its jobs and state are
copied then deleted in batches, the target releases it, and the directory records the move.

The shards' keys have different hash tags, so the copy is host-side: read on the source
(lane_move_out.lua), written on the target (lane_move_in.lua), deleted on the source
(lane_move_drop.lua) only where a row is still as it was copied. Every step is idempotent and
recorded on the shards (``moved``, ``adopted``), so a mover that stops anywhere is finished by
running it again. Dead jobs and kept results stay on the source. A flow node whose parent
stays on the source is copied naming the source's shard as its parent's queue (the outbox
relay carries its end there); a parent of the lane still waiting on the source after the
release joins the lane there, and the mover carries it over then (the follow step).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from echomq.engine.checks import MAX_BATCH, count, ms, text
from echomq.engine.keys import validate_group
from echomq.engine.shards import lane_slot, read_map
from echomq.errors import InvalidArgument
from echomq.wire.connector import Arg

if TYPE_CHECKING:
    from echomq.engine.queue import Queue
    from echomq.engine.sharded import ShardedQueue

#: Jobs copied per batch (each kind: pending, then scheduled).
MOVE_BATCH: Final = 100
#: Seconds between two looks at the source's leases of the lane while they drain.
DRAIN_POLL: Final = 0.05

#: The mover's steps, in order (a mover stopped after any of them is finished by a new run).
STEPS: Final = ("adopt", "freeze", "drain", "copy", "release", "follow", "record")


class LaneMove:
    """One move of ``lane`` to shard ``to`` of ``queue``: :meth:`plan` reads where things are
    (and checks the arguments, before any write), then each step of :data:`STEPS` is a method."""

    def __init__(
        self,
        queue: ShardedQueue,
        lane: str,
        to: int,
        *,
        batch: int = MOVE_BATCH,
        poll: float = DRAIN_POLL,
    ) -> None:
        self.queue = queue
        self.lane = validate_group(lane)
        self.to = count(to, "to", minimum=0, maximum=len(queue.shards) - 1)
        self.batch = count(batch, "batch", maximum=MAX_BATCH)
        self.poll = ms(poll, "poll", positive=True) / 1000
        self.source = -1  # the shard the lane leaves: plan() reads it
        self.released = False  # the target serves the lane already: only the record is left
        self._rank = 0  # where the next batch looks at the source's schedule
        self._found = False  # some scheduled job of the lane found since the look wrapped
        self._more = False  # the last look says the schedule may hold more of the lane

    @property
    def _from(self) -> Queue:
        return self.queue.shards[self.source]

    @property
    def _to(self) -> Queue:
        return self.queue.shards[self.to]

    async def plan(self) -> bool:
        """Read the directory and the shards' marks; False when the lane is on ``to`` already
        (nothing to do). A move of the lane to another shard, begun and not finished (that
        shard holds it adopted from its source), is refused (``to``): finish it first, by
        moving the lane there."""
        placement = await read_map(self.queue.wire, self.queue.keys)
        assert placement is not None
        self.queue.install_placement(placement)
        self.source = placement.shard_of(self.lane)
        source, lane = str(self.source), self.lane
        moved, *adopted = await asyncio.gather(
            self._from.wire.call("HGET", self._from.keys.moved, lane),
            *(shard.wire.call("HGET", shard.keys.adopted, lane) for shard in self.queue.shards),
        )
        begun = [k for k, held in enumerate(adopted) if held is not None and text(held) == source]
        if moved is not None:
            begun.append(int(text(moved)))
        elsewhere = sorted({k for k in begun if k != self.to})
        if elsewhere:
            raise InvalidArgument(
                "to",
                self.to,
                f"lane {lane!r} is moving from shard {source} to shard {elsewhere[0]}: finish "
                "that move first (move it there again)",
            )
        if self.source == self.to:
            return False
        target = adopted[self.to]
        self.released = moved is not None and target is not None and text(target) == ""
        if moved is None and (waiting := await self.waiting_parents()):
            # Its jobs would wait frozen until the parents' children end; and a parent only
            # joins its lane where its row is: it must join on the source, then be copied.
            raise InvalidArgument(
                "lane",
                lane,
                f"lane {lane!r} has {len(waiting)} flow parent(s) waiting for their children "
                f"on shard {source} (e.g. {waiting[0]}): move it once they have joined it",
            )
        return True

    async def run(self, steps: Sequence[str] = STEPS) -> bool:
        """Plan, then run ``steps`` (all by default); False when there was nothing to do."""
        if not await self.plan():
            return False
        for step in steps:
            if self.released and step in ("adopt", "freeze", "drain", "copy"):
                continue
            await getattr(self, step)()
        return True

    def _script(self, shard: Queue, name: str, args: Sequence[Arg]) -> Any:
        registry = self.queue.scripts
        keys = (shard.keys.root, shard.keys.gate)
        return registry.run(shard.wire, registry.scripts[name], keys, args)

    async def adopt(self) -> None:
        """Step 1: the target admits the lane's enqueues and keeps it off its ring."""
        await self._script(self._to, "lane_adopt", (self.lane, self.source))

    async def _out(self, batch: int) -> list[Any]:
        reply: list[Any] = await self._script(
            self._from, "lane_move_out", (self.lane, self.to, batch, self._rank)
        )
        return reply

    async def freeze(self) -> None:
        """Step 2: the source refuses the lane's enqueues toward the target and leases none of
        its jobs."""
        await self._out(0)

    async def drain(self) -> None:
        """Step 3: wait until the source holds no lease of the lane (its settles and reaps
        go on as usual), so the target's count starts where the source's ends. A flow parent
        of the lane waiting on the source is not waited for here: its children may be jobs of
        this very lane, which run only once the target serves it (:meth:`follow`)."""
        while int((await self._out(0))[0]) > 0:
            await asyncio.sleep(self.poll)

    async def waiting_parents(self) -> list[str]:
        """The source's flow parents of the lane still waiting for their children (a scan of
        its ``waiting`` index, 1,000 at a time, and each one's lane)."""
        source, cursor = self._from, "0"
        found: list[str] = []
        while True:
            cursor, ids = await source.wire.call(
                "ZSCAN", source.keys.waiting, cursor, "COUNT", 1000
            )
            ids = [text(i) for i in ids[::2]]
            if not ids:
                if text(cursor) == "0":
                    return found
                continue
            lanes = await source.wire.call_many(
                [("HGET", source.keys.job(i), "group") for i in ids]
            )
            found += [
                i for i, g in zip(ids, lanes, strict=True) if g is not None and text(g) == self.lane
            ]
            if text(cursor) == "0":
                return found

    async def copy(self) -> None:
        """Step 4: the lane's state, then its pending and scheduled jobs in batches, written
        to the target and deleted from the source (its state is deleted there at the
        release)."""
        await self.copy_state()
        while await self.copy_batch():
            pass

    async def copy_state(self) -> None:
        """The lane's settings, policy, pause, cooling, holder and rate window, to the target."""
        _, state, claims, *_ = await self._out(0)
        args = (self.lane, "state", len(state), *state, *claims)
        await self._script(self._to, "lane_move_in", args)

    async def copy_batch(self) -> bool:
        """One batch of the lane's jobs written to the target, then deleted from the source
        where still as copied; False when the source has none left (or none found in a whole
        look at its schedule)."""
        jobs = await self.export_batch()
        if not jobs:
            return self._more
        parents = [text(job[0]) for job in jobs if "children" in _fields(job[3])]
        await self.copy_children(parents)
        await self.import_batch(jobs)
        await self.drop_batch(jobs)
        return True

    async def copy_children(self, parents: Sequence[str]) -> None:
        """What the children of flow ``parents`` left them (results, errors), to the target
        before the rows: a parent in the lane has every child's outcome already (it joined
        when the last one ended), so nothing arrives on the source after this copy."""
        if not parents:
            return
        source, target = self._from, self._to
        keys = [(source.keys.flow_results(i), target.keys.flow_results(i)) for i in parents] + [
            (source.keys.flow_failed(i), target.keys.flow_failed(i)) for i in parents
        ]
        found = await source.wire.call_many([("HGETALL", old) for old, _ in keys])
        writes = [
            ("HSET", new, *_pairs(pairs))
            for (_, new), pairs in zip(keys, found, strict=True)
            if pairs
        ]
        if writes:
            await target.wire.call_many(writes)

    async def export_batch(self) -> list[Any]:
        """Up to ``batch`` pending, then ``batch`` scheduled jobs of the lane, read on the
        source (lane_move_out.lua's jobs); the schedule is looked at a window at a time, round
        until the source holds none of the lane's scheduled jobs."""
        reply = await self._out(self.batch)
        jobs: list[Any] = reply[3]
        rank, left = int(reply[4]), int(reply[5])
        self._found = self._found or any(text(job[1]) == "schedule" for job in jobs)
        self._more = left > 0
        self._rank = max(rank, 0)
        if rank < 0:  # the look went past the end: round again only if this round found some
            self._more = self._more and self._found
            self._found = False
        return jobs

    async def import_batch(self, jobs: Sequence[Any]) -> None:
        """``jobs`` (as exported) written to the target, the lane held there, each flow
        child's parent named where it is from the target (:func:`_rehomed`)."""
        source, target = self._from.keys.tag, self._to.keys.tag
        rows = [(*job[:3], _rehomed(job[3], source, target), *job[4:]) for job in jobs]
        await self._script(self._to, "lane_move_in", (self.lane, "jobs", *_flat(rows)))

    async def drop_batch(self, jobs: Sequence[Any]) -> None:
        """``jobs`` (as exported and imported) deleted from the source where still as copied."""
        copied = [part for job in jobs for part in (*job[:3], _attempts(job[3]))]
        dropped = await self._script(self._from, "lane_move_drop", (self.lane, "jobs", *copied))
        gone = [text(i) for i in dropped]
        parents = {text(job[0]) for job in jobs if "children" in _fields(job[3])}
        if stale := [i for i in gone if i in parents]:  # their children's outcomes went along
            source = self._from
            await source.wire.call(
                "DEL",
                *(source.keys.flow_results(i) for i in stale),
                *(source.keys.flow_failed(i) for i in stale),
            )
        await self._forget_ended({text(job[0]) for job in jobs} - {text(i) for i in dropped})

    async def _forget_ended(self, kept: set[str]) -> None:
        """The copies of jobs the source kept because they left the lane there meanwhile
        (cancelled, removed or reassigned between the export and the delete) are removed from
        the target: a job kept because it changed place in the lane (a scheduled job promoted)
        is copied again by the next batch."""
        if not kept:
            return
        ids = sorted(kept)
        source = self._from
        rows = await source.wire.call_many(
            [("HMGET", source.keys.job(i), "state", "group") for i in ids]
        )
        for job_id, (state, group) in zip(ids, rows, strict=True):
            in_lane = state is not None and text(state) in ("pending", "scheduled")
            if not in_lane or text(group or "_") != self.lane:
                await self._script(self._to, "remove", (job_id,))

    async def release(self) -> None:
        """Step 5: the target serves the lane (it joins the ring if serviceable)."""
        await self._script(self._to, "lane_adopt", (self.lane, ""))
        # Only now the source's copy of the lane's state goes: a mover stopped before the
        # release copies the state again when run again, so it must still be there to copy
        # (deleted after the copy, a rerun copied nothing and cleared the target's settings).
        await self._script(self._from, "lane_move_drop", (self.lane, "state"))

    async def follow(self) -> None:
        """Step 6: the lane's flow parents still waiting on the source (admitted between the
        plan's look and the freeze, which fences any later one) join the lane there once
        their children end (a child of the lane runs on the target, its end relayed back):
        wait for each to leave ``waiting``, then carry those that joined to the target, as
        the copy does, the lane served there meanwhile. Nothing when none waits."""
        waiting = await self.waiting_parents()
        while waiting:
            await asyncio.sleep(self.poll)
            states = await self._from.wire.call_many(
                [("HGET", self._from.keys.job(i), "state") for i in waiting]
            )
            waiting = [i for i, st in zip(waiting, states, strict=True) if text(st) == "waiting"]
        while await self.copy_batch():
            pass
        # A parent that joined after the copy and before the release kept the lane's state
        # there (the release deletes it only from a source holding none of the lane's jobs).
        await self._script(self._from, "lane_move_drop", (self.lane, "state"))

    async def record(self) -> None:
        """The directory's overrides and epoch (the epoch first: a record stopped between the
        two writes is written again, one epoch later), the fence of the shard the lane's slot
        names pointed at the target, and this queue's placement."""
        queue, keys, lane, to = self.queue, self.queue.keys, self.lane, self.to
        epoch = int(await queue.wire.call("HINCRBY", keys.directory, "epoch", 1))
        home = queue.placement_map.owner(lane_slot(lane))
        if to == home:
            await queue.wire.call("HDEL", keys.placed, lane)
        else:
            await queue.wire.call("HSET", keys.placed, lane, to)
            if home != self.source:
                shard = queue.shards[home]
                await shard.wire.call("HSET", shard.keys.moved, lane, to)
        for shard in {queue.shards[self.source], queue.shards[to]}:
            await shard.wire.call("HSET", shard.keys.meta, "epoch", epoch)
        overrides = dict(queue.placement_map.overrides)
        overrides.pop(lane, None)
        if to != home:
            overrides[lane] = to
        queue.install_placement(
            replace(queue.placement_map, overrides=tuple(overrides.items()), epoch=epoch)
        )


def _fields(row: Sequence[Any]) -> dict[str, Any]:
    """A row read as ``HGETALL`` pairs, by field name."""
    return {text(name): value for name, value in zip(row[::2], row[1::2], strict=True)}


def _rehomed(row: Sequence[Any], source: str, target: str) -> list[Any]:
    """A flow child's row (``HGETALL`` pairs) as the target holds it: a parent on the source
    (no ``parent_q``) is named by the source's tag, so the child's end reaches it through the
    target's outbox relay (a failure policy rides on each entry); one on the target (its tag
    in ``parent_q``: the child was admitted or moved away from it) is told there directly. A
    parent on another shard or queue, and a row that is no flow child, are copied as they
    are."""
    fields = _fields(row)
    if "parent" not in fields:
        return list(row)
    where = text(fields.pop("parent_q", b""))
    if where in ("", source):
        fields["parent_q"] = source
    elif where != target:
        fields["parent_q"] = where
    return [part for pair in fields.items() for part in pair]


def _attempts(row: Sequence[Any]) -> Any:
    """The ``attempts`` field of a row read as ``HGETALL`` pairs."""
    return _fields(row).get("attempts", 0)


def _pairs(reply: Any) -> list[Any]:
    """An ``HGETALL`` reply (RESP3: a map; RESP2: a flat list) as flat field, value pairs."""
    if isinstance(reply, dict):
        return [part for pair in reply.items() for part in pair]
    return list(reply)


def _flat(jobs: Sequence[Sequence[Any]]) -> list[Any]:
    """lane_move_out's jobs as lane_move_in's ARGV: id, where, score, n, row pairs, m, log
    lines, dedup ttl."""
    out: list[Any] = []
    for job_id, where, score, row, log, ttl in jobs:
        out += [job_id, where, score, len(row), *row, len(log), *log, ttl]
    return out

"""What a sharded queue does on every shard: the lane handle on its shard, upkeep, the reads
summed or merged, and the admin verbs written to each shard (a mixin of
:class:`~echomq.engine.sharded.ShardedQueue`, docs/concepts/shards.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

from echomq.engine.checks import MAX_CEILING, count
from echomq.engine.events import Subscriptions
from echomq.engine.keys import Keyspace, validate_group
from echomq.engine.lanes import Lane
from echomq.engine.options import PRIORITY_DEFAULT
from echomq.engine.policies import DEFAULT_MODE, FairBy, Policies, Policy, RateMode, rate_value
from echomq.engine.queue import Queue
from echomq.engine.rebalancer import Rebalancer
from echomq.engine.results import Counts, JobInfo, LaneInfo, Reaped, Upkeep
from echomq.engine.shard_stats import ShardStats, read_shard_stats, summed
from echomq.engine.sharded_lanes import ShardedLane
from echomq.engine.shards import (
    Handoff,
    ShardMap,
    handed_to,
    handoffs_from_text,
    lanes_by_shard,
    read_map,
)
from echomq.errors import StateError

_T = TypeVar("_T")


class AcrossShards:
    """The verbs of a sharded queue that every shard answers (mixed into ``ShardedQueue``)."""

    shards: tuple[Queue, ...]
    placement: ShardMap | None
    wire: Any
    keys: Any
    rebalancer: Rebalancer

    def install_placement(self, placement: ShardMap) -> None: ...  # ShardedQueue's

    @property
    def placement_map(self) -> ShardMap:
        """Where every lane lives: the tags, the lane-slot table, the overrides, the epoch."""
        assert self.placement is not None
        return self.placement

    def _shard_of_lane(self, lane: str) -> Queue:
        return self.shards[self.placement_map.shard_of(lane)]

    def keys_of(self, lane: str) -> Keyspace:
        """The keyspace of ``lane``'s shard."""
        return self._shard_of_lane(validate_group(lane)).keys

    async def _every(self, verb: Callable[..., Awaitable[_T]], *args: Any, **kw: Any) -> list[_T]:
        """``verb`` (a :class:`Queue` method) on every shard at once, answers in shard order."""
        return list(await asyncio.gather(*(verb(shard, *args, **kw) for shard in self.shards)))

    def lane(self, name: str) -> Lane:
        """The control handle of lane ``name``: its reads on its shard, its setters there and,
        while a grow hands its range on, on the range's target too (:class:`ShardedLane`)."""
        shard = self._shard_of_lane(validate_group(name))
        return ShardedLane(self, shard, name)  # type: ignore[arg-type]

    async def grow_handoffs(self) -> tuple[Handoff, ...]:
        """The lane-slot ranges a grow in progress hands on (none: no grow), from one read of
        the directory's epoch and plan; a newer epoch is installed first, as every admin verb
        does."""
        epoch, plan = await self.wire.call("HMGET", self.keys.directory, "epoch", "grow")
        await self._placement_moved_on(epoch)
        return handoffs_from_text(plan.decode()) if plan else ()

    async def lane_shards(self, lane: str) -> list[Queue]:
        """The shards ``lane``'s settings are written to: its own, then, while a grow hands its
        range on, the range's target (:meth:`grow_handoffs`)."""
        handoffs = await self.grow_handoffs()
        k = self.placement_map.shard_of(validate_group(lane))
        target = handed_to(handoffs, k, lane)
        return [self.shards[k]] if target is None else [self.shards[k], self.shards[target]]

    async def upkeep(self, limit: int = 1000, max_stalled: int = 3) -> Upkeep:
        """Every shard's upkeep at once, summed; ``next_due`` the soonest. The first starts
        this process's quota rebalancer (it runs rounds only while a budget is set)."""
        self.rebalancer.start()  # the queue-wide quotas move where the workers are
        done = await asyncio.gather(
            *(Queue.upkeep(shard, limit, max_stalled) for shard in self.shards)
        )
        dues = [u.next_due for u in done if u.next_due is not None]
        return Upkeep(
            sum(u.moved for u in done),
            sum(u.lanes for u in done),
            Reaped(
                [i for u in done for i in u.reaped.recovered],
                [i for u in done for i in u.reaped.dead],
            ),
            min(dues) if dues else None,
        )

    async def promote(self, limit: int = 1000) -> int:
        return sum(await self._every(Queue.promote, limit))

    async def reap(self, limit: int = 100, max_stalled: int = 3) -> Reaped:
        done = await self._every(Queue.reap, limit, max_stalled)
        return Reaped([i for r in done for i in r.recovered], [i for r in done for i in r.dead])

    async def counts(self) -> Counts:
        """Every shard's counts, summed."""
        return summed(await self._every(Queue.counts))

    async def lanes(self, names: Sequence[str] = ()) -> list[LaneInfo]:
        if names:
            placement = self.placement_map
            wanted: dict[int, list[str]] = {}
            for name in names:
                wanted.setdefault(placement.shard_of(validate_group(name)), []).append(name)
            parts = await asyncio.gather(
                *(Queue.lanes(self.shards[k], part) for k, part in wanted.items())
            )
            found = {info.lane: info for part in parts for info in part}
            return [found[name] for name in names if name in found]
        return [info for part in await self._every(Queue.lanes) for info in part]

    async def ring(self) -> list[str]:
        """The serviceable lanes, the most urgent band first; within a band each shard's rota
        in turn, shard by shard (the claims interleave them by weight)."""
        bands = await asyncio.gather(
            *(shard.wire.call("HGET", shard.keys.meta, "bands") for shard in self.shards)
        )
        used = [{int(p) for p in (b or b"").decode()} | {PRIORITY_DEFAULT} for b in bands]
        rings = await asyncio.gather(
            *(
                shard.wire.call_many(
                    [("LRANGE", shard.keys.band_ring(band), 0, -1) for band in sorted(mine)]
                )
                for shard, mine in zip(self.shards, used, strict=True)
            )
        )
        by_band: dict[int, list[str]] = {}
        for mine, lists in zip(used, rings, strict=True):
            for band, members in zip(sorted(mine), lists, strict=True):
                by_band.setdefault(band, []).extend(m.decode() for m in members)
        return [lane for band in sorted(by_band, reverse=True) for lane in by_band[band]]

    async def is_paused(self) -> bool:
        return all(await self._every(Queue.is_paused))

    async def shard_stats(self) -> list[ShardStats]:
        """Each shard in order: its tag, primary, lanes, jobs per state, active weight W_s
        and claims/s (:class:`~echomq.engine.shard_stats.ShardStats`); every shard read at
        once. The jobs per state sum to :meth:`counts`' (read at a slightly different time)."""
        return await read_shard_stats(self.shards)

    async def has_work(self, scheduled_within: float = 0.0) -> bool:
        return any(await self._every(Queue.has_work, scheduled_within))

    async def rate_limit_ttl(self) -> float:
        return max(await self._every(Queue.rate_limit_ttl))

    async def etas(self) -> dict[str, Any]:
        return {lane: eta for part in await self._every(Queue.etas) for lane, eta in part.items()}

    async def dead(self, limit: int = 100) -> list[JobInfo]:
        """The dead jobs of every shard, at most ``limit`` of each, merged by id (mint order)."""
        return sorted(
            (info for part in await self._every(Queue.dead, limit) for info in part),
            key=lambda info: info.id,
        )[:limit]

    # -- admin (every shard) -------------------------------------------------------------------

    async def _current(self) -> None:
        """Take on the shards another process added (a grow this queue has not heard of at a
        load read yet), so an admin write reaches every shard: one read of the directory's
        epoch, on admin verbs only (claims hear of it at their load reads)."""
        epoch = await self.wire.call("HGET", self.keys.directory, "epoch")
        await self._placement_moved_on(epoch)

    if TYPE_CHECKING:  # ShardedQueue's (declared only: a definition here would hide it)

        async def _placement_moved_on(self, epoch: Any) -> bool:
            """Install the directory when its epoch is past this queue's; True: shards added."""

    async def _every_current(
        self, verb: Callable[..., Awaitable[_T]], *args: Any, **kw: Any
    ) -> list[_T]:
        """:meth:`_every` on every shard there is now (:meth:`_current` first)."""
        await self._current()
        return await self._every(verb, *args, **kw)

    async def pause(self) -> None:
        await self._every_current(Queue.pause)

    async def resume(self) -> None:
        await self._every_current(Queue.resume)

    async def fairness(self, by: FairBy = "count", *, quantum: float | None = None) -> bool:
        return any(await self._every_current(Queue.fairness, by, quantum=quantum))

    async def apply_policies(
        self,
        policies: Mapping[str, Policy] | None = None,
        /,
        *,
        default: Policy | None = None,
        **lanes: Policy,
    ) -> int:
        """Every shard holds the default; each named lane's own policy goes to its shard (and
        a lane named before and not now is cleared there, as on one queue). While a grow hands
        a named lane's range on, its policy goes to the range's target too, after its shard's
        (the settings' copy reads the source after writing the target): the answer then counts
        that lane's changes on both. The directory is read again after the writes: a grow
        that began meanwhile (its settings' copy may have read a source before this write) has
        its targets, and any shard it added, written too."""
        named = {**(policies or {}), **lanes}
        for lane in named:
            validate_group(lane)
        before = await Queue.policies(self.shards[0])
        written: dict[int, dict[str, Policy]] = {}  # shard -> the lanes written there
        changed: list[int] = []
        while True:
            handoffs = await self.grow_handoffs()  # takes on the shards a grow added
            per_shard = lanes_by_shard(named, self.placement_map, handoffs)
            todo = [k for k, part in enumerate(per_shard) if written.get(k) != part]
            if not todo:
                break
            targets = {h[3] for h in handoffs}
            for part in ([k for k in todo if k not in targets], [k for k in todo if k in targets]):
                changed += await asyncio.gather(
                    *(
                        Queue.apply_policies(self.shards[k], per_shard[k], default=default)
                        for k in part
                    )
                )
            written.update((k, per_shard[k]) for k in todo)
        # Every shard holds the same default, so each of its settings that changed was counted
        # once per shard: the queue's answer counts it once, as one queue's does.
        after = (await Queue.policies(self.shards[0])).default
        fields_changed: int = sum(
            bool(getattr(after, f.name) != getattr(before.default, f.name)) for f in fields(Policy)
        )
        return sum(changed) - (len(self.shards) - 1) * fields_changed

    async def policies(self) -> Policies:
        """The default (every shard holds it) and every shard's named lanes."""
        each = await self._every(Queue.policies)
        lanes = {lane: policy for part in each for lane, policy in part.lanes.items()}
        return Policies(each[0].default, dict(sorted(lanes.items())))

    async def ordered(self, on: bool) -> None:
        await self._every_current(Queue.ordered, on)

    async def drain(self, *, schedule: bool = False, results: bool = False) -> int:
        return sum(await self._every_current(Queue.drain, schedule=schedule, results=results))

    async def obliterate(self, *, force: bool = False) -> None:
        """Delete every key of every shard, the shards' fence (``owns``, ``moved``,
        ``adopted``, ``importing``, ``migrating``) and, last, the directory and its
        overrides: the name can then be opened again, sharded with another count or not.
        Refused (:class:`StateError`) before anything is deleted unless every shard is paused,
        and, without ``force``, while any shard holds a leased job. Shards another process
        added (a grow this queue has not heard of yet) are read from the directory first."""
        placement = await read_map(self.wire, self.keys)
        if placement is not None and placement.epoch > self.placement_map.epoch:
            self.install_placement(placement)  # shards another process added: theirs too
        found = await asyncio.gather(
            *(
                s.wire.call_many([("HGET", s.keys.meta, "paused"), ("EXISTS", s.keys.meta)])
                for s in self.shards
            ),
            *(s.wire.call("ZCARD", s.keys.active) for s in self.shards),
        )
        shapes, held = found[: len(self.shards)], found[len(self.shards) :]
        # A shard with no meta left was obliterated already (by a call that stopped midway).
        if not all(paused or not int(exists) for paused, exists in shapes):
            raise StateError("EMQSTATE obliterate refused: queue is not paused on every shard")
        if not force and any(int(n) for n in held):
            raise StateError("EMQSTATE obliterate refused: leased jobs present (use force)")
        await self.rebalancer.stop()  # this process's quota rounds: none writes a quota back
        await self._every(Queue.obliterate, force=force)
        await asyncio.gather(
            *(
                shard.wire.call(
                    "DEL",
                    shard.keys.owns,
                    shard.keys.moved,
                    shard.keys.adopted,
                    shard.keys.importing,
                    shard.keys.migrating,
                )
                for shard in self.shards
            )
        )
        # The directory last: a reader that finds it finds every shard it names.
        await self.wire.call(
            "DEL", self.keys.rebalancer, self.keys.placing, self.keys.placed, self.keys.directory
        )

    async def concurrency(self, ceiling: int | None) -> bool:
        """At most ``ceiling`` jobs of the queue leased at once, over every shard (None removes
        it): the budget is split into per-shard quotas that never sum past it and move only as
        unused room (docs/concepts/shards.md, "Queue-wide gates across shards"), moved toward
        the shards whose lanes wait by the rebalancer the workers' upkeep runs. False: it held
        that value already (nothing written)."""
        value = None if ceiling is None else str(count(ceiling, "ceiling", maximum=MAX_CEILING))
        await self._current()  # every shard there is now takes its share
        return await self.rebalancer.set_budget("concurrency", value)

    async def rate_limit(
        self, max: int | None, window: float | None = None, *, mode: RateMode = DEFAULT_MODE
    ) -> bool:
        """At most ``max`` claims per ``window`` seconds over every shard (None removes it),
        split into per-shard quotas as :meth:`concurrency` is. Smooth (the default) is exact:
        no ``window`` holds more than ``max`` claims; fixed windows are each shard's own, not
        aligned (any window holds at most 2 x ``max``). A new window or mode starts every
        shard's quota at 0 and hands the budget out again in the same call."""
        value = None if max is None else rate_value(max, window, mode)
        await self._current()  # every shard there is now takes its share
        return await self.rebalancer.set_budget("rate", value)

    def subscribe(self) -> Subscriptions:
        """A subscriber of every shard's lifecycle events as one (each shard publishes its own
        jobs' on its own channel; on a cluster each channel is heard on its shard's node)."""
        return Subscriptions([Queue.subscribe(shard) for shard in self.shards])

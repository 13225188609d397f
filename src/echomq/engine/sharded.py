"""One logical queue over many slots: S shards, each a complete queue under a hash tag of its
own, with every lane wholly on one shard (docs/concepts/shards.md).

A :class:`ShardedQueue` is a :class:`Queue` whose own keyspace is shard 0 (an unsharded queue
*is* shard 0 of a sharded one) and which holds one shard queue per shard. What it adds:

* **placement**: an admission goes to its lane's shard (``ShardMap.shard_of``), fenced there by
  the map's epoch and the lane's slot (enqueue.lua refuses a lane the shard does not own);
  ``enqueue_many`` sends each shard its items at once, verdicts back in the caller's order;
* **claims** visit the shards by stride scheduling over their active weights
  (:class:`ShardStride`): each shard's ring shares its claims by lane weight, and the stride
  shares the claims among shards by the weights on their rings, so every lane gets what one
  ring would give; each claim's reply carries its shard's load after it (the visit that
  changed it reports it), every shard's is read every ``refresh`` seconds (one pipelined read
  per shard: the shards not visited), and a claim that finds a shard empty marks it idle;
* **settles** go to the shard that leased the job (``Job.shard``); a job named by id alone is
  found by the shard that leased it here, else by one read of every shard;
* **reads** are every shard's, summed or merged; **admin** writes every shard;
* **flows** are admitted per shard (each node on its lane's), the parents' shards first; a
  child on another shard than its parent tells it through its shard's outbox relay;
* **events**: one subscription over every shard's channel;
* **queue-wide gates**: ``concurrency`` and ``rate_limit`` split the budget into per-shard
  quotas (:mod:`echomq.engine.rebalancer`), moved by the rebalancer the workers' upkeep runs.

What a sharded queue does not do yet is refused by name (:class:`Unsupported`), never done on
shard 0 alone: a flow into a second sharded queue, and shrinking the shard count. Moving one
lane to another shard is :meth:`ShardedQueue.move_lane` (echomq.engine.lane_move); growing the
count online is :meth:`ShardedQueue.grow` (echomq.engine.shard_grow).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Final, TypeVar

from echomq.engine import ids as _ids
from echomq.engine.cancels import CancelHubs
from echomq.engine.checks import MAX_BATCH, count, ms
from echomq.engine.dead_move import DeadMoves
from echomq.engine.flows import Children, Flow, FlowIds, by_shard, plan
from echomq.engine.held_dedup import source_duplicate
from echomq.engine.keys import DEFAULT_GROUP, Keyspace, slot, validate_group
from echomq.engine.lane_move import MOVE_BATCH, LaneMove
from echomq.engine.options import Admission, Fence, JobOptions
from echomq.engine.placement_lease import PlacementLease
from echomq.engine.producer import admission_verdict
from echomq.engine.queue import DEFAULT_LEASE, Queue
from echomq.engine.rebalancer import Rebalancer
from echomq.engine.results import Empty, Job, RateLimited, Upkeep, Verdict
from echomq.engine.shard_grow import add_shards, check_count, grow
from echomq.engine.shard_schedule import IDLE, ShardLoad, ShardStride
from echomq.engine.sharded_jobs import JobsAcrossShards
from echomq.engine.sharded_loads import LoadsAcrossShards
from echomq.engine.sharded_planes import AcrossShards
from echomq.engine.sharded_settles import SettlesAcrossShards
from echomq.engine.shards import MOVE_HOPS, ShardMap, check_shards, read_map, slot_owners
from echomq.engine.transitions import Claimed, Engine, enqueue_together
from echomq.errors import (
    EchoMQError,
    InvalidArgument,
    LaneHeld,
    LaneMoved,
    Unsupported,
    WireError,
)
from echomq.wire.pool import Wire
from echomq.wire.url import ConnectionOptions, seeds_from_url

#: Seconds between two reads of every shard's load (a worker hears of a shard it is not
#: visiting that often).
REFRESH: Final = 0.1

_T = TypeVar("_T")


class ShardedQueue(
    LoadsAcrossShards, JobsAcrossShards, DeadMoves, SettlesAcrossShards, AcrossShards, Queue
):
    """One logical queue over ``placement.shards`` shards (docs/concepts/shards.md).

    Open one with :meth:`connect` (or :meth:`open` on a wire of yours): the first opens the
    queue's directory and shards, every later one reads them. Every promise about a lane —
    its order, ceiling, rate, weight, pause, cooling, priority bands — is its shard's, exact;
    across shards the claims follow the lanes' weights (the error bound in the design page).
    """

    _relay_due = False  # shard 0's own: see relay_due

    def __init__(
        self, placement: ShardMap, wire: Wire, *, refresh: float = REFRESH, **options: Any
    ) -> None:
        super().__init__(placement.queue, wire, shard=(placement, 0), **options)
        self._shared = shared = {**options, "minter": self.minter, "scripts": self.scripts}
        #: The shards, in order: shard 0 is this queue itself.
        others = [
            Queue(placement.queue, wire, shard=(placement, k), **shared)
            for k in range(1, placement.shards)
        ]
        self.shards: tuple[Queue, ...] = (self, *others)
        for shard in self.shards[1:]:
            shard.spans = self.spans  # the app's tracer provider reaches every shard's sends
        #: Every shard's cancel subscription, for the consumers of this queue.
        self._hubs = CancelHubs(self.wire, self.keys, [shard.cancel_hub for shard in others])
        self.cancel_hub = self._hubs
        self.refresh = ms(refresh, "refresh") / 1000  # 0: read every claim
        self._stride = ShardStride(placement.shards, offset=id(self) // 16)
        self._loads_at = -1.0  # loop time of the last read of every shard's load
        self._held: dict[str, int] = {}  # leased job id -> its shard, for settles by id
        self._closes_wire = False  # connect opened it
        self._dues: list[int | None] = [None] * placement.shards  # first benched lane's return
        self._now_ms = 0  # server ms of the last read of the loads
        self._reading: asyncio.Future[list[ShardLoad]] | None = None  # the read in flight
        #: The queue-wide gates' quotas (docs/concepts/shards.md, "Queue-wide gates"); a
        #: round that finds more shards in the directory installs the grown map first.
        self.rebalancer = Rebalancer(self.shards, self.keys, self._placement_moved_on)
        self._shard_reads: dict[int, asyncio.Future[None]] = {}  # each shard's, in flight

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        url: str | ConnectionOptions,
        name: str,
        *,
        pool_size: int = 1,
        shards: int | None = None,
        **options: Any,
    ) -> ShardedQueue:
        """Open a pool (or a cluster router) to ``url`` and the sharded queue ``name`` of
        ``shards`` shards on it (made at the first open); :meth:`close` closes the wire."""
        if shards is None:
            raise InvalidArgument("shards", shards, "a sharded queue needs its shard count")
        from echomq.wire.cluster import open_wire  # the router builds on the pool: imported late

        Keyspace(name)  # validates before connecting
        check_shards(shards)
        seeds = [url] if isinstance(url, ConnectionOptions) else seeds_from_url(url)
        wire = await open_wire(seeds, pool_size)
        try:
            queue = await cls.open(name, wire, shards=shards, **options)
            await queue.engine.check_persistence()
        except BaseException:
            await wire.close()
            raise
        queue._closes_wire = True
        return queue

    @classmethod
    async def open(cls, name: str, wire: Wire, *, shards: int, **options: Any) -> ShardedQueue:
        """The sharded queue ``name`` on ``wire``: its directory read, or, the first time, its
        shards made (their tags spread over a cluster's primaries) and the directory written.
        ``shards`` must be what the directory holds (changing it is a later landing)."""
        keys = Keyspace(name)
        check_shards(shards)
        placement = await read_map(wire, keys)
        if placement is None:
            placement = ShardMap.create(name, shards, slot_owners(wire))
            await _refuse_a_queue_with_work(wire, keys)
            for k in range(placement.shards):
                await wire.call_many(placement.fence_commands(k))
            # Two first opens at once compute the same map (the choice is deterministic for
            # one cluster map), so their writes agree; the directory goes last, so a reader
            # that finds it finds every shard made.
            directory = [part for pair in placement.to_directory().items() for part in pair]
            await wire.call("HSET", keys.directory, *directory)
        elif placement.shards < shards:
            raise InvalidArgument(
                "shards",
                shards,
                f"queue {name!r} has {placement.shards} shards: grow it to {shards} "
                "(ShardedQueue.grow, online) before opening it so (docs/concepts/shards.md, "
                "'Changing S')",
            )
        # More shards than asked: the queue grew since this process's setting was written
        # (a deploy that still says the old count); the directory is the truth.
        return cls(placement, wire, **options)

    @property
    def wake_keys(self) -> tuple[str, ...]:
        """Every shard's wake list: a parked consumer wakes on a token from any of them."""
        return tuple(shard.keys.wake for shard in self.shards)

    async def close(self) -> None:
        """Stop the quota rebalancer, close every shard's subscriptions, then this queue (its
        minter, its wire)."""
        await self.rebalancer.stop()
        waiting: list[asyncio.Future[Any] | None] = [*self._shard_reads.values(), self._clock_read]
        for read in waiting:
            if read is not None:
                read.cancel()  # a read waiting on a primary that does not answer
        if self._reading is not None:
            self._reading.cancel()  # the shared read of every load, if one is in flight
        for shard in self.shards[1:]:
            await shard.close()
        await super().close()  # its cancel hub closes every shard's
        if self._closes_wire:
            await self.wire.close()

    def __repr__(self) -> str:
        return f"ShardedQueue({self.name!r}, shards={len(self.shards)})"

    # -- admission -----------------------------------------------------------------------------

    async def _admit(self, payload: Any, options: JobOptions, checked: bool = False) -> Verdict:
        """The item admitted on the shard of its lane (:meth:`Queue.admit` traces it as this
        queue's); a lane moved since this queue read the directory is sent again, where the
        refusing shard says it went (``MOVE_HOPS`` times at most). (``checked`` is the shards'
        word, not this queue's.)"""
        lane = DEFAULT_GROUP if options.lane is None else validate_group(options.lane)
        shard = self._shard_of_lane(lane)
        for _ in range(MOVE_HOPS):
            try:
                return await self._admit_held(shard, payload, options)
            except LaneMoved as moved:
                k = await self._moved_to(moved, lane)  # may add shards: self.shards read after
                shard = self.shards[k]
        return await self._admit_held(shard, payload, options)

    async def _admit_held(self, shard: Queue, payload: Any, options: JobOptions) -> Verdict:
        """The item admitted on ``shard``. An item of a lane held there for a move
        (:class:`LaneHeld`, docs/concepts/shards.md, "Dedup while a lane is held"): the
        duplicate of the job its key or id names on the lane's source, else sent again with
        them checked (``echomq.engine.held_dedup``)."""
        try:
            return await Queue._admit(shard, payload, options)
        except LaneHeld as held:
            if held.shard >= len(self.shards):
                await self._current()  # the source is a shard of a grow not heard of yet
            source = self.shards[held.shard]
            found = await source_duplicate(source, held.lane, options.dedup_key, options.id)
            if isinstance(found, EchoMQError):
                raise found from None  # the duplicate's cover fell short
            if found is not None:
                return admission_verdict(*found)
        return await Queue._admit(shard, payload, options, checked=True)

    async def _enqueue_admissions(
        self, admissions: list[Admission], checked: bool = False
    ) -> list[Any]:
        """Each shard its items, fenced, at once; the replies in input order. Items refused
        because their lane moved (:class:`LaneMoved`) are sent once more, where it went; the
        items of a lane held for a move (:class:`LaneHeld`), as :meth:`_admit_held` says.
        (``checked`` is the shards' word, not this queue's.)"""
        placement = self.placement_map
        shards = [placement.shard_of(item.group) for item in admissions]
        replies = await self._admit_scattered(admissions, shards)
        for _ in range(MOVE_HOPS):
            moved = [i for i, reply in enumerate(replies) if isinstance(reply, LaneMoved)]
            if not moved:
                break
            again = [admissions[i] for i in moved]
            targets = [await self._moved_to(replies[i], admissions[i].group) for i in moved]
            answers = await self._admit_scattered(again, targets)
            for i, answer, k in zip(moved, answers, targets, strict=True):
                replies[i], shards[i] = answer, k
        await self._answer_held(admissions, replies, shards)
        return replies

    async def _answer_held(
        self, admissions: list[Admission], replies: list[Any], shards: list[int]
    ) -> None:
        """In ``replies`` (``admissions[i]`` sent to shard ``shards[i]``), each :class:`LaneHeld`
        refusal replaced as :meth:`_admit_held` replaces one: the sources read at once, the
        items sent again at once."""
        held = [i for i, reply in enumerate(replies) if isinstance(reply, LaneHeld)]
        if not held:
            return
        if any(replies[i].shard >= len(self.shards) for i in held):
            await self._current()  # a source is a shard of a grow not heard of yet
        founds = await asyncio.gather(
            *(
                source_duplicate(
                    self.shards[replies[i].shard],
                    admissions[i].group,
                    admissions[i].dedup,
                    admissions[i].id,
                )
                for i in held
            )
        )
        unknown: list[int] = []  # keys the lanes' sources do not hold
        for i, found in zip(held, founds, strict=True):
            if found is None:
                unknown.append(i)
            else:
                replies[i] = found
        answers = await self._scatter(
            [admissions[i] for i in unknown],
            [shards[i] for i in unknown],
            lambda shard, items: Queue._enqueue_admissions(shard, items, checked=True),
        )
        for i, answer in zip(unknown, answers, strict=True):
            replies[i] = answer

    async def _admit_scattered(self, admissions: list[Admission], shards: list[int]) -> list[Any]:
        """``admissions[i]`` admitted on shard ``shards[i]``, the shards at once. Durable, the
        shards one connection carries (one server's; on a cluster, one primary's) go in one
        pipeline with one ``WAITAOF`` after them all (``enqueue_together``), not one each."""
        if self.durability is None:
            return await self._scatter(admissions, shards, Queue._enqueue_admissions)
        placement, owner = self.placement_map, getattr(self.wire, "owner", None)
        parts: dict[int, list[int]] = {}  # shard -> its items' positions
        for i, k in enumerate(shards):
            parts.setdefault(k, []).append(i)
        servers: dict[str, list[int]] = {}  # server (a router's: the slot's primary) -> shards
        for k in parts:
            server = "" if owner is None else owner(slot(self.shards[k].keys.root)).address
            servers.setdefault(server, []).append(k)

        def part(k: int) -> tuple[Engine, list[Admission], Fence]:
            items = [admissions[i] for i in parts[k]]
            return self.shards[k].engine, items, placement.fence(item.group for item in items)

        answers = await asyncio.gather(
            *(enqueue_together([part(k) for k in on_server]) for on_server in servers.values())
        )
        replies: list[Any] = [None] * len(admissions)
        for on_server, answer in zip(servers.values(), answers, strict=True):
            for k, part_replies in zip(on_server, answer, strict=True):
                for i, reply in zip(parts[k], part_replies, strict=True):
                    replies[i] = reply
        return replies

    async def _moved_to(self, moved: LaneMoved, lane: str) -> int:
        """The shard to send ``lane`` to after ``moved``: the directory is read again (the
        move may be over), and the refusing shard's word wins while it is not."""
        await self._install_newer()
        return moved.shard if moved.shard is not None else self.placement_map.shard_of(lane)

    def install_placement(self, placement: ShardMap) -> None:
        """Fence this queue's admissions with ``placement`` from now on (read from the
        directory, or written by a move or a grow): every shard's, and the lanes' shards. A
        map of more shards (another process grew the queue) adds their shard queues, claimed
        by the stride, parked on by the consumers (``wake_keys``) and heard for cancels (the
        hubs of the new shards open at the next :meth:`read_loads`)."""
        grown = [
            Queue(placement.queue, self.wire, shard=(placement, k), **self._shared)
            for k in range(len(self.shards), placement.shards)
        ]
        for shard in grown:
            shard.spans = self.spans
        if grown:
            self.shards = (*self.shards, *grown)
            self._stride.extend(placement.shards)
            self._dues += [None] * len(grown)
            self.rebalancer.shards = self.shards
            self._hubs.join([shard.cancel_hub for shard in grown])
        for shard in self.shards:
            shard.placement = placement

    async def upkeep(self, limit: int = 1000, max_stalled: int = 3) -> Upkeep:
        """Every shard's upkeep (``AcrossShards.upkeep``), the directory's epoch read beside
        it: a consumer parked on an empty queue claims only when woken, so a grow by another
        process is taken on here, at its next beat, and its new shards' ringed lanes count as
        work found (the consumer claims, and parks on their wake lists from then on)."""
        epoch, done = await asyncio.gather(
            self.wire.call("HGET", self.keys.directory, "epoch"),
            super().upkeep(limit, max_stalled),
        )
        before = len(self.shards)
        if not await self._placement_moved_on(epoch):
            return done
        loads = await self.read_loads()
        ringed = sum(load.is_active for load in loads[before:])
        return replace(done, lanes=done.lanes + ringed)

    async def add_shards(self, shards: int) -> bool:
        """Grow this queue to ``shards`` shards, the first part of growing it online
        (docs/concepts/shards.md, "Changing S"): the new shards made empty (meta copied from
        shard 0, quota 0 of a queue-wide budget), the directory's count, tags and epoch
        written with the plan of lane-slot ranges each old shard hands to a new one, and those
        ranges marked ``migrating`` on their source and ``importing`` on their target. From
        then on a lane of a handed range with jobs on its source is served there, and any other
        starts on its new shard; other processes take the new shards on at their next load
        read. The settings of the handed ranges' lanes are copied to their targets before the
        marks, and until the flip a lane setter writes such a lane's on both. ``shards`` (more
        than the count there is, at most 256) is checked before any write; calling it again for
        a grow in progress writes the settings and the marks again. False when the queue has
        that many shards already. Moving the lanes still on their source and the flip of the
        ranges are the next part. Runs under the queue's placement lease (one move or grow at
        a time: :class:`~echomq.errors.PlacementBusy` names the holder)."""
        check_count(shards)
        async with PlacementLease(self, f"growth to {shards} shards"):
            return await add_shards(self, shards)

    async def grow(self, shards: int, *, batch: int = MOVE_BATCH) -> bool:
        """Grow this queue to ``shards`` shards online (docs/concepts/shards.md, "Changing
        S"): :meth:`add_shards`, then each lane its source still holds in a range it hands on
        moved to its new shard (:meth:`move_lane`: that lane pauses for its move alone), then
        the ranges flip (the targets own them, the directory's table and epoch follow, the
        marks go). Resumable: a grow that stopped is finished by calling this again. False
        when the queue had ``shards`` shards already. Runs under the queue's placement lease:
        a second grow, or a lane move, meanwhile is refused (:class:`~echomq.errors.PlacementBusy`,
        naming the holder); a holder that died leaves it to expire, then a grow resumes."""
        check_count(shards)
        count(batch, "batch", maximum=MAX_BATCH)
        async with PlacementLease(self, f"growth to {shards} shards"):
            return await grow(self, shards, batch=batch)

    # -- moving a lane -------------------------------------------------------------------------

    async def move_lane(self, lane: str, *, to: int, batch: int = MOVE_BATCH) -> bool:
        """Move ``lane`` to shard ``to`` (docs/concepts/shards.md, "Moving a lane"), online:
        the lane pauses for the move (its longest lease in flight plus the copy) and every
        other lane is served throughout. Its pending and scheduled jobs, dedup keys, logs,
        settings, pause, cooling and rate window go with it, ``batch`` jobs at a time; its dead
        jobs and kept results stay on its old shard. Producers learn the move from the
        fences (this queue's at once). A flow parent of the lane admitted while the move
        began is waited for after the lane is served on ``to`` (its children may be jobs of
        the lane), then carried there. Every step is recorded on the shards, so a move that
        stopped (a crash, a cancel) is finished by calling this again.

        ``lane`` and ``to`` (0 .. shards - 1) are checked before any write; a move of the
        lane to another shard, begun and not finished, is refused (``to``). Returns False
        when the lane is on ``to`` already. Runs under the queue's placement lease: another
        move or a grow meanwhile is refused (:class:`~echomq.errors.PlacementBusy`)."""
        move = LaneMove(self, lane, to, batch=batch)  # its arguments checked: no write yet
        async with PlacementLease(self, f"move of lane {move.lane!r} to shard {move.to}"):
            return await move.run()

    # -- claims --------------------------------------------------------------------------------

    async def claim_some(
        self, n: int, lease: float = DEFAULT_LEASE, *, one_lane: bool = False
    ) -> tuple[list[Job], bool] | Empty | RateLimited:
        """Claim on the shard the stride picks (the one whose lanes are furthest behind their
        weights' share); a shard found empty is marked idle and the next one is tried, so
        ``Empty`` means every shard was (the loads are read again before it is answered, when
        the last read is older than the call). ``more``: some shard still has a serviceable lane.
        Each claim's reply carries its shard's load after it, which the stride takes at once."""
        return await Queue.claim_some(self, n, lease, one_lane=one_lane)  # checks, then _leased

    async def _leased(
        self, lease_ms: int, n: int, one_lane: bool, load: bool = False
    ) -> tuple[list[Job], Claimed] | Empty | RateLimited:
        """:meth:`claim_some`'s visits, its arguments checked: the claim of the shard that
        leased, its ``more`` true while any shard is known to have work (``load`` is every
        shard claim's own: each carries its shard's load to the stride)."""
        stride = self._stride
        fresh = asyncio.get_running_loop().time() - self._loads_at >= self.refresh
        if fresh:
            await self._loads_now()
        retry_in: float | None = None
        lost: WireError | None = None
        visited: set[int] = set()
        for _ in range(2 * len(self.shards) + 2):  # a shard twice at most: before, after a read
            k = stride.pick()
            if k is None:
                if not fresh:
                    # Known idle, but the loads are older than this call: "empty" must be true
                    # now (a lane resumed or joined a shard since the last read).
                    await self._loads_now()
                    fresh = True
                    continue
                # Idle by every ring: a lane benched by its rate whose time came rejoins its
                # ring at its shard's next claim (or upkeep), so such a shard is visited once.
                k = next((d for d in self._due_now() if d not in visited), None)
                if k is None:
                    break
            visited.add(k)
            try:
                self._check_reachable(k)
                shard = self.shards[k]  # shard 0 is this queue: its own claim, not these visits
                outcome = await Queue._leased(shard, lease_ms, n, one_lane, load=True)
            except WireError as exc:  # its primary unreachable: the other shards are served
                stride.observe(k, IDLE)
                lost = exc
                continue
            if isinstance(outcome, tuple):
                jobs, claimed = outcome
                stride.charge(k, len(jobs))  # at the weight it was picked by, then its news
                self._heard(k, claimed, lease_ms)
                self._remember(jobs)
                return jobs, replace(claimed, more=claimed.more or stride.pick() is not None)
            stride.observe(k, IDLE)  # empty, or its own budget spent: visit the others
            wait = outcome.retry_in if isinstance(outcome, Empty) else outcome.wait
            if wait is not None:
                retry_in = wait if retry_in is None else min(retry_in, wait)
        if lost is not None:
            raise lost  # not "empty": a shard could not be asked
        hints = [h for h in (retry_in, *self._due_later(visited)) if h is not None]
        return Empty(min(hints) if hints else None)

    async def _placement_moved_on(self, epoch: Any) -> bool:
        """The directory's epoch (read with the loads) is past this queue's: read the
        directory and install it (a move's overrides, a grow's shards). True when the queue
        gained shards (their cancel hubs opened here)."""
        if epoch is None or int(epoch) <= self.placement_map.epoch:
            return False
        return await self._install_newer()

    async def _install_newer(self) -> bool:
        """Read the directory and install it when its epoch is past this queue's (a move's
        overrides, a grow's shards, their cancel hubs opened here). True: shards added."""
        placement = await read_map(self.wire, self.keys)
        if placement is None or placement.epoch <= self.placement_map.epoch:
            return False
        before = len(self.shards)
        self.install_placement(placement)
        await self._hubs.catch_up()
        return len(self.shards) > before

    # -- each shard its part (admissions, settles) ---------------------------------------------

    async def _scatter(
        self,
        items: list[_T],
        shards: list[int],
        call: Callable[[Queue, list[_T]], Awaitable[list[Any]]],
    ) -> list[Any]:
        """``call`` each shard with its part of ``items`` (``shards[i]`` is item i's), the parts
        at once; the answers in input order."""
        if not items:
            return []
        first = shards[0]
        if all(k == first for k in shards):  # one shard (a batch claim's settles): as is
            return await call(self.shards[first], items)
        parts: dict[int, list[int]] = {}
        for i, k in enumerate(shards):
            parts.setdefault(k, []).append(i)
        answers = await asyncio.gather(
            *(call(self.shards[k], [items[i] for i in positions]) for k, positions in parts.items())
        )
        outcomes: list[Any] = [None] * len(items)
        for positions, part in zip(parts.values(), answers, strict=True):
            for i, outcome in zip(positions, part, strict=True):
                outcomes[i] = outcome
        return outcomes

    # -- flows ---------------------------------------------------------------------------------

    async def _add_flow(self, flow: Flow) -> FlowIds:
        """:meth:`Queue.add_flow` on a sharded queue: the nodes grouped by their lane's shard,
        one fenced ``flow.lua`` call per shard (and per other queue), the parents' first; a
        child whose parent lives on another shard names that shard's tag as its parent's
        queue, so its shard's upkeep relays its outcome there (docs/concepts/shards.md)."""
        if not self.minter.is_ready:
            await self.minter.ready()
        placement = self.placement_map
        laid = by_shard(
            plan(flow, self.name, self.codec, lambda: self.minter.mint("JOB")),
            self.name,
            placement.tags,
            placement.shard_of,
        )
        shard_of_tag = {tag: k for k, tag in enumerate(placement.tags)}
        others = [name for name in laid.writes if name not in shard_of_tag]
        if others:
            sharded = await self.wire.call_many(
                [("EXISTS", Keyspace(name).directory) for name in others]
            )
            for name, found in zip(others, sharded, strict=True):
                if found:
                    raise Unsupported(
                        f"a flow across two sharded queues ({self.name!r} and {name!r}) is not "
                        "built yet (docs/concepts/shards.md)"
                    )
        await self._expect_parents(laid)
        written = False
        for where, nodes in laid.writes.items():
            args = [node.args() for node in nodes]
            k = shard_of_tag.get(where)
            if k is None:
                admitted, _existing = await self._engine_of(where).flow(args)
            else:
                shard = self.shards[k]
                fence = placement.fence(node.group for node in nodes)
                admitted, _existing = await shard.engine.flow(args, fence)
                if admitted:  # each shard's events on its own channel (only while listened)
                    for node in nodes:
                        shard.publish("waiting" if node.children else "enqueued", node.id)
            written = written or admitted
        ids = laid.ids
        return ids if written else FlowIds(ids.id, ids.queue, ids.children, "duplicate")

    async def children(self, id: str) -> Children:
        """What parent ``id``'s children left it, read on the parent's shard."""
        return await Queue.children(await self._shard_of(id), id)

    @property
    def relay_due(self) -> bool:
        """Some shard's completion appended to its flow outbox since its last upkeep: a
        consumer runs the upkeep (every shard's, each relaying its own outbox) at once."""
        return self._relay_due or any(shard.relay_due for shard in self.shards[1:])

    @relay_due.setter
    def relay_due(self, due: bool) -> None:
        self._relay_due = due


async def _refuse_a_queue_with_work(wire: Wire, keys: Keyspace) -> None:
    """A queue of one slot that holds jobs cannot become shard 0 by a first open: its lanes
    would be split from their new shards (growing a queue is the move procedure's work)."""
    probe = Queue(keys.queue, wire, minter=_ids.Minter(0))
    counts = await probe.counts()
    if counts.pending or counts.active or counts.scheduled or counts.waiting:
        raise InvalidArgument(
            "shards",
            "",
            f"queue {keys.queue!r} holds jobs as a queue of one slot; shard it by drain and "
            "switch to a queue of another name (docs/concepts/shards.md, 'Changing S')",
        )

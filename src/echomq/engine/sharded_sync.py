"""The blocking producer of a sharded queue: :class:`ShardedSyncQueue`, a :class:`SyncQueue`
whose own keyspace is shard 0 and which sends each admission to its lane's shard, fenced, as
:class:`~echomq.engine.sharded.ShardedQueue` does (docs/concepts/shards.md, "The fence").

The directory is read once at open. A shard's ``LaneMoved`` refusal reads it once more and
sends the refused items where it now places their lanes (or to the shard the refusal names),
with the same ids; refused again, the refusal is the answer. Reads by id find the job's shard
by one ``EXISTS`` per shard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from echomq.engine import ids as _ids
from echomq.engine.checks import text
from echomq.engine.durability import Durability
from echomq.engine.eta import Eta
from echomq.engine.held_dedup import sync_source_duplicate
from echomq.engine.keys import DEFAULT_GROUP, Keyspace, slot, validate_dedup, validate_group
from echomq.engine.options import Admission, JobOptions
from echomq.engine.policies import Policy, Rate
from echomq.engine.producer import admission_verdict
from echomq.engine.results import Cancellation, JobInfo, JobState, Verdict
from echomq.engine.shards import (
    MOVE_HOPS,
    Handoff,
    ShardMap,
    check_shards,
    handed_to,
    lanes_by_shard,
    stored_handoffs,
    stored_map,
)
from echomq.engine.sync_process import SyncProcess
from echomq.engine.sync_queue import SyncQueue, send_admissions
from echomq.errors import EchoMQError, InvalidArgument, LaneHeld, LaneMoved
from echomq.wire.blocking import error_of, pack
from echomq.wire.codec import Codec
from echomq.wire.url import ConnectionOptions, seeds_from_url


class ShardedSyncQueue(SyncQueue):
    """The producer side of a sharded queue, blocking: ``ShardedSyncQueue.connect(url, name,
    shards=S)``, the queue opened once by :meth:`ShardedQueue.connect` (which makes its
    shards; a worker's open does).

    :class:`SyncQueue`'s verbs, each on the shard of the job's lane: ``enqueue_many`` sends
    each shard its items, the shards sharing a server in one pipeline (one round trip; on a
    cluster one per primary, sent before any reply is read), verdicts in input order;
    ``job``, ``state``, ``wait``, ``cancel``, ``logs``, ``position`` find the job's shard;
    ``configure_lane`` and ``lane_eta`` go to the lane's; ``apply_policies`` to every shard.
    """

    def __init__(
        self,
        name: str,
        seeds: Sequence[ConnectionOptions],
        *,
        codec: Codec | None = None,
        result_ttl: float = 0.0,
        durability: Durability | None = None,
    ) -> None:
        super().__init__(name, seeds, codec=codec, result_ttl=result_ttl, durability=durability)
        #: The shards, in order: shard 0 is this queue itself (placed at open).
        self.shards: tuple[SyncQueue, ...] = (self,)

    @classmethod
    def connect(  # type: ignore[override]
        cls,
        url: str | ConnectionOptions,
        name: str,
        *,
        shards: int,
        codec: Codec | None = None,
        result_ttl: float = 0.0,
        durability: Durability | None = None,
    ) -> ShardedSyncQueue:
        """Connect to ``url`` and read the directory of the sharded queue ``name``, which must
        hold ``shards`` shards (``InvalidArgument`` naming ``shards`` when it holds another
        count, or none: the queue's first :meth:`ShardedQueue.connect` makes it)."""
        Keyspace(name)  # validates before connecting
        check_shards(shards)
        seeds = [url] if isinstance(url, ConnectionOptions) else seeds_from_url(url)
        queue = cls(name, seeds, codec=codec, result_ttl=result_ttl, durability=durability)
        try:
            queue._open(shards)
        except BaseException:
            queue.close()
            raise
        return queue

    @classmethod
    def taking_over(cls, plain: SyncQueue, placement: ShardMap) -> ShardedSyncQueue:
        """The sharded producer of ``placement`` on ``plain``'s process (its router and
        sockets, started; its id node, if leased): what :func:`connect_sync_queue` makes of a
        queue it opened by name once it read the directory there, rather than a second
        connection. ``plain`` is spent: closed, its process given on, not back."""
        queue = cls(
            plain.name,
            plain.seeds,
            codec=plain.codec,
            result_ttl=plain.result_ttl_ms / 1000,
            durability=plain.durability,
        )
        queue._process = plain._process  # before the shards, which run on it
        queue._place(placement)
        plain._closed = True
        return queue

    def _open(self, shards: int) -> None:
        """Start the wire, read the directory, and take its placement."""
        self._start()
        placement = self.read_placement()
        if placement is None:
            raise InvalidArgument(
                "shards",
                shards,
                f"queue {self.name!r} has no shard directory: a ShardedQueue.connect(url, "
                f"{self.name!r}, shards={shards}) makes it (a worker's, or the app's connect)",
            )
        if placement.shards < shards:  # more than asked: it grew since the setting was written
            raise InvalidArgument(
                "shards",
                shards,
                f"queue {self.name!r} has {placement.shards} shards: grow it to {shards} "
                "(ShardedQueue.grow, online) before opening it so (docs/concepts/shards.md, "
                "'Changing S')",
            )
        self._place(placement)

    def close(self) -> None:
        for shard in self.shards[1:]:
            shard.close()  # they run on this queue's process, closed below
        super().close()

    def __repr__(self) -> str:
        return f"ShardedSyncQueue({self.name!r}, shards={len(self.shards)})"

    # -- placement -----------------------------------------------------------------------------

    @property
    def placement_map(self) -> ShardMap:
        """Where every lane lives, as last read from the directory."""
        assert self.placement is not None, "placed at connect"
        return self.placement

    def _place(self, placement: ShardMap) -> None:
        """Take ``placement``: the shards' fences follow it (new shard queues for new tags)."""
        if self.placement is not None and self.placement.tags == placement.tags:
            for shard in self.shards:
                shard.placement = placement
            return
        self.placement = placement
        self.shards = (self, *(_Shard(self, placement, k) for k in range(1, placement.shards)))

    def _reread(self) -> None:
        """Read the directory again (a shard refused a lane as moved) and take what it holds."""
        current = self.read_placement()
        if current is not None:
            self._place(current)

    def _retarget(self, lane: str, refused: Any, tried: int) -> int | None:
        """Where to send again an item of ``lane`` that shard ``tried`` refused (``refused``,
        a :class:`LaneMoved`): where the map read again places it, else the shard the refusal
        names; None when neither is another shard (the refusal is the answer)."""
        k = self.placement_map.shard_of(lane)
        named = refused.shard
        if k == tried and named is not None and 0 <= named < len(self.shards):
            k = named
        return None if k == tried else k

    def _lane_shard(self, lane: str | None) -> int:
        return self.placement_map.shard_of(DEFAULT_GROUP if lane is None else validate_group(lane))

    # -- admission (the lane's shard) ----------------------------------------------------------

    def _admit(self, payload: Any, options: JobOptions, checked: bool = False) -> Verdict:
        lane = DEFAULT_GROUP if options.lane is None else validate_group(options.lane)
        k = self.placement_map.shard_of(lane)
        for _ in range(MOVE_HOPS):
            try:
                return self._admit_held(k, payload, options)
            except LaneMoved as refused:
                self._reread()
                again = self._retarget(lane, refused, k)
                if again is None:
                    raise
                k = again
        return self._admit_held(k, payload, options)

    def _admit_held(self, k: int, payload: Any, options: JobOptions) -> Verdict:
        """The item admitted on shard ``k``; an item of a lane held there for a move
        (:class:`LaneHeld`): the duplicate of the job its key or id names on the lane's source,
        else sent again with them checked (``echomq.engine.held_dedup``)."""
        try:
            return SyncQueue._admit(self.shards[k], payload, options)
        except LaneHeld as held:
            if held.shard >= len(self.shards):
                self._reread()  # the source is a shard of a grow not heard of yet
            source = self.shards[held.shard]
            found = sync_source_duplicate(source, held.lane, options.dedup_key, options.id)
            if isinstance(found, EchoMQError):
                raise found from None  # the duplicate's cover fell short
            if found is not None:
                return admission_verdict(*found)
        return SyncQueue._admit(self.shards[k], payload, options, checked=True)

    def _replies(self, process: SyncProcess, admissions: list[Admission]) -> list[Any]:
        """Each shard its items (one pipelined call per shard); the items a shard refused as
        moved sent again where the directory read again places them (``MOVE_HOPS`` times at
        most)."""
        placement = self.placement_map
        shards = [placement.shard_of(item.group) for item in admissions]
        replies = self._scatter(process, admissions, shards)
        for _ in range(MOVE_HOPS):
            moved = [i for i, reply in enumerate(replies) if isinstance(reply, LaneMoved)]
            if not moved:
                break
            self._reread()
            again: list[int] = []
            targets: list[int] = []
            for i in moved:
                k = self._retarget(admissions[i].group, replies[i], shards[i])
                if k is not None:
                    again.append(i)
                    targets.append(k)
            if not again:
                break
            answers = self._scatter(process, [admissions[i] for i in again], targets)
            for i, answer, k in zip(again, answers, targets, strict=True):
                replies[i], shards[i] = answer, k
        return self._answer_held(process, admissions, replies, shards)

    def _answer_held(
        self,
        process: SyncProcess,
        admissions: list[Admission],
        replies: list[Any],
        shards: list[int],
    ) -> list[Any]:
        """``replies`` with each :class:`LaneHeld` refusal answered as :meth:`_admit_held`
        answers one: the items sent again in one pipeline."""
        unknown: list[int] = []
        if any(isinstance(r, LaneHeld) and r.shard >= len(self.shards) for r in replies):
            self._reread()  # a source is a shard of a grow not heard of yet
        for i, reply in enumerate(replies):
            if isinstance(reply, LaneHeld):
                item = admissions[i]
                source = self.shards[reply.shard]
                found = sync_source_duplicate(source, item.group, item.dedup, item.id)
                if found is None:
                    unknown.append(i)
                else:
                    replies[i] = found
        answers = self._scatter(
            process, [admissions[i] for i in unknown], [shards[i] for i in unknown], checked=True
        )
        for i, answer in zip(unknown, answers, strict=True):
            replies[i] = answer
        return replies

    def _scatter(
        self,
        process: SyncProcess,
        admissions: list[Admission],
        shards: list[int],
        checked: bool = False,
    ) -> list[Any]:
        """``admissions[i]`` sent to shard ``shards[i]``: every shard's calls in one pipeline
        per server (one round trip where the shards share one); replies in order (``checked``:
        :meth:`SyncQueue._admit`'s)."""
        parts: dict[int, list[int]] = {}
        for i, k in enumerate(shards):
            parts.setdefault(k, []).append(i)
        answers = send_admissions(
            process,
            [
                (self.shards[k], [admissions[i] for i in positions])
                for k, positions in parts.items()
            ],
            checked,
        )
        replies: list[Any] = [None] * len(admissions)
        for positions, part in zip(parts.values(), answers, strict=True):
            for i, reply in zip(positions, part, strict=True):
                replies[i] = reply
        return replies

    # -- lanes ---------------------------------------------------------------------------------

    def configure_lane(
        self,
        group: str,
        *,
        limit: int | None = None,
        rate: Rate | tuple[int, float] | None = None,
        cap: int | None = None,
    ) -> None:
        written: list[int] = []
        shards = self._setting_shards(group)
        while shards:
            for k in shards:
                SyncQueue.configure_lane(self.shards[k], group, limit=limit, rate=rate, cap=cap)
                written.append(k)
            # A grow that began after the directory was read copied the lane's settings before
            # this write reached its source: the target is written too (read after the write).
            shards = [k for k in self._setting_shards(group) if k not in written]

    def apply_policies(
        self,
        policies: Mapping[str, Policy] | None = None,
        /,
        *,
        default: Policy | None = None,
        **lanes: Policy,
    ) -> int:
        """Every shard holds the default; each named lane's own policy goes to its shard (and,
        while a grow hands its range on, to the range's target too, after the other shards).
        The settings changed on every shard, summed (a default changed counts once per
        shard). The directory is read again after the writes: a grow that began meanwhile has
        its targets, and any shard it added, written too."""
        named = {**(policies or {}), **lanes}
        for lane in named:
            validate_group(lane)
        written: dict[int, dict[str, Policy]] = {}  # shard -> the lanes written there
        changed = 0
        while True:
            handoffs = self._read_handoffs()  # takes on the shards a grow added
            per_shard = lanes_by_shard(named, self.placement_map, handoffs)
            todo = [k for k, part in enumerate(per_shard) if written.get(k) != part]
            if not todo:
                return changed
            targets = {h[3] for h in handoffs}
            for k in [k for k in todo if k not in targets] + [k for k in todo if k in targets]:
                changed += SyncQueue.apply_policies(self.shards[k], per_shard[k], default=default)
                written[k] = per_shard[k]

    def _read_handoffs(self) -> tuple[Handoff, ...]:
        """The directory read again (one round trip) and taken: a lane setter writes where the
        lanes are now, on every shard there is; the ranges a grow in progress hands on."""
        directory, placed = self.read_directory()
        current = stored_map(directory, placed)
        if current is not None:
            self._place(current)
        return stored_handoffs(directory)

    def _setting_shards(self, lane: str) -> list[int]:
        """The shards a setting of ``lane`` is written to: its own, then, while a grow hands
        its range on, the range's target (docs/concepts/shards.md, "Changing S", step 2)."""
        handoffs = self._read_handoffs()
        k = self._lane_shard(lane)
        target = handed_to(handoffs, k, lane)
        return [k] if target is None else [k, target]

    def lane_eta(self, group: str) -> Eta:
        return SyncQueue.lane_eta(self.shards[self._lane_shard(group)], group)

    # -- by id (the shard that holds the job) --------------------------------------------------

    def _every_shard(
        self, command_of: Callable[[Keyspace], tuple[Any, ...]]
    ) -> Iterator[tuple[SyncQueue, Any]]:
        """Each shard with its reply to ``command_of(its keys)``, in shard order: the commands
        all sent at once (one round trip per server); an error reply raised when reached."""
        calls = [(slot(shard.keys.root), pack(command_of(shard.keys))) for shard in self.shards]
        for shard, reply in zip(self.shards, self._here().router.call_spread(calls), strict=True):
            found = error_of(reply)
            if isinstance(found, BaseException):
                raise found
            yield shard, found

    def _shard_of_id(self, id: str) -> SyncQueue:
        """The shard whose row of job ``id`` exists (one ``EXISTS`` per shard, all sent at
        once), else shard 0, which answers as for no such job."""
        job_id = _ids.validate(id, "JOB", "job id")
        found = (shard for shard, n in self._every_shard(lambda k: ("EXISTS", k.job(job_id))) if n)
        return next(found, self)

    def job(self, id: str) -> JobInfo | None:
        return SyncQueue.job(self._shard_of_id(id), id)

    def dedup_job(self, key: str) -> str | None:
        """The job ``key`` maps to, every shard read at once (as :meth:`ShardedQueue.dedup_job`):
        the first shard's, in shard order."""
        validate_dedup(key)
        found = (seen for _, seen in self._every_shard(lambda k: ("GET", k.dedup(key))))
        return next((text(seen) for seen in found if seen is not None), None)

    def state(self, id: str) -> JobState:
        return SyncQueue.state(self._shard_of_id(id), id)

    def logs(self, id: str, limit: int = 100) -> list[str]:
        return SyncQueue.logs(self._shard_of_id(id), id, limit)

    def position(self, id: str) -> Eta | None:
        return SyncQueue.position(self._shard_of_id(id), id)

    def wait(self, id: str, timeout: float | None = None) -> JobInfo | None:
        return SyncQueue.wait(self._shard_of_id(id), id, timeout)

    def cancel(self, id: str, reason: str = "") -> Cancellation:
        return SyncQueue.cancel(self._shard_of_id(id), id, reason)


class _Shard(SyncQueue):
    """Shard k >= 1 of a :class:`ShardedSyncQueue`: its keyspace and fence, on its home's
    process (router and id node lease; a forked child's are the home's new ones)."""

    def __init__(self, home: ShardedSyncQueue, placement: ShardMap, k: int) -> None:
        super().__init__(
            home.name,
            home.seeds,
            codec=home.codec,
            result_ttl=home.result_ttl_ms / 1000,
            durability=home.durability,
            shard=(placement, k),
        )
        self._home = home
        self._process = home._process
        self.spans = home.spans

    def _here(self) -> SyncProcess:
        self._process = self._home._here()
        return self._process

    def close(self) -> None:
        """Closed with its home, whose process (router, id node) it runs on."""
        self._closed = True

"""The engine's typed surface: one method per Lua transition of a queue.

Each method takes typed values, lays them out as the script's ``ARGV`` and decodes its reply;
no other module names a script or knows the order of its arguments. Arguments arrive checked
(the public layer bounds them); the scripts check them again before their first write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from echomq.engine.checks import text
from echomq.engine.durability import Durability, check_persistence
from echomq.engine.keys import Keyspace
from echomq.engine.options import Admission, Fence, admission_argv
from echomq.engine.results import Job
from echomq.engine.scripts import Script, ScriptRegistry
from echomq.errors import EchoMQError, server_error
from echomq.wire.connector import Arg
from echomq.wire.pool import Wire, call_durable

#: Items per ``enqueue`` script call of a batch: large enough that the per-call cost (the
#: round trip's share, EVALSHA dispatch, the script's set-up) is spread thin, small enough that
#: one call holds the server for well under a millisecond (bench/README.md, "Chunk size").
ADMIT_CHUNK = 100
#: Jobs per ``complete`` or ``retry`` script call of a batch (same reasoning).
SETTLE_CHUNK = 100

#: One item's reply to an admission: ``(code, id, state)`` — 1 enqueued, 2 scheduled, 0
#: duplicate (``id`` is the job that holds the work, ``state`` its row state then; "" for the
#: other codes) — or the refusal (``LaneFull`` for a full lane) or wire error in its place.
Admitted = tuple[int, str, str] | EchoMQError
#: One job's settle code (see complete.lua / retry.lua), or the wire error in its place.
SettleCode = int | EchoMQError


class Failure(NamedTuple):
    """One failed attempt as ``retry.lua`` takes it; its fields, in order, are its ``ARGV``.
    ``traceback`` "" for none (at most ``checks.MAX_TRACEBACK`` bytes)."""

    id: str
    token: int
    delay_ms: int
    max_attempts: int
    error: str
    traceback: str = ""


class Success(NamedTuple):
    """One succeeded job as ``complete.lua`` takes it; its fields, in order, are its ``ARGV``.
    ``result`` is the codec's bytes, b"" when the queue keeps no results; ``ran_ms`` the ms its
    handler ran, as its consumer measured it (0: unmeasured; fairness by time then charges the
    time the job held its lease)."""

    id: str
    token: int
    result: bytes = b""
    ran_ms: int = 0


@dataclass(frozen=True, slots=True)
class Claimed:
    """A claim's answer: the shared lease deadline, whether a lane was still serviceable, and
    the reply itself, whose jobs :meth:`jobs` decodes (once, straight into :class:`Job`)."""

    deadline_ms: int
    more: bool
    reply: list[Any]
    #: A sharded queue's claim (``load``): the shard's most urgent band with a ringed lane (-1:
    #: none), that band's active weight and its first rate-benched lane's return (server ms,
    #: -1: none), after the claim; None for a plain queue's.
    load: tuple[int, int, int] | None = None

    def jobs(self, decode: Callable[[bytes], Any], queue: str, shard: int = 0) -> list[Job]:
        """The claimed jobs, their payloads decoded with ``decode``: the reply holds each as
        ``id, payload, attempts, lane`` from its third value on."""
        reply, deadline = self.reply, self.deadline_ms
        return [
            Job(text(reply[i]), decode(reply[i + 1]), int(reply[i + 2]), text(reply[i + 3]),
                deadline, queue, shard)
            for i in range(2, len(reply), 4)
        ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class TickReply:
    moved: int
    lanes: int
    recovered: list[str]
    dead: list[str]
    next_due_ms: int  # < 0: nothing waits on time
    outbox: int = 0  # flow entries waiting for the relay (parents on other queues)


class Engine:
    """The transitions of one queue on one wire, each one typed method."""

    def __init__(
        self,
        wire: Wire,
        keys: Keyspace,
        scripts: ScriptRegistry,
        durability: Durability | None = None,
    ) -> None:
        self.wire = wire
        self.registry = scripts
        #: Admissions (and, with its ``settles``, completes and retries) wait for WAITAOF.
        self.durability = durability
        self._settles_durable = durability if durability and durability.settles else None
        self._persistence_checked = False
        # KEYS[1] is the root every script builds on; the gate rides along for slot migrations.
        self._keys: tuple[Arg, ...] = (keys.root, keys.gate)
        get = scripts.__getitem__
        self._enqueue, self._claim, self._complete = get("enqueue"), get("claim"), get("complete")
        self._retry, self._delay, self._extend = get("retry"), get("delay"), get("extend")
        self._promote, self._tick, self._reap = get("promote"), get("tick"), get("reap")
        self._counts, self._lanes, self._configure = get("counts"), get("lanes"), get("configure")
        self._work, self._eta = get("work"), get("eta")
        self._lane_limit, self._pause, self._resume = (
            get("lane_limit"),
            get("pause"),
            get("resume"),
        )
        self._cool, self._uncool = get("cool"), get("uncool")
        self._drain, self._obliterate, self._remove = get("drain"), get("obliterate"), get("remove")
        self._reassign, self._reprocess = get("reassign"), get("reprocess")
        self._progress = get("progress")
        self._cancel = get("cancel")
        self._policy = get("policy")
        self._quota = get("quota")
        self._flow, self._flow_deliver = get("flow"), get("flow_deliver")
        self.keys = keys

    async def check_persistence(self) -> None:
        """Refuse (:class:`DurabilityUnavailable`) a server that cannot confirm the asked
        fsyncs: AOF off while a local fsync is asked. Asked once per engine, before the first
        durable write; ``Queue.connect`` asks at once. On a cluster every primary is asked."""
        durability = self.durability
        if durability is None or self._persistence_checked:
            return
        nodes = getattr(self.wire, "nodes", None)
        if isinstance(nodes, dict):
            infos = [(n.address, await n.call("INFO", "persistence")) for n in nodes.values()]
        else:
            infos = [(self.wire.options.address, await self.wire.call("INFO", "persistence"))]
        for address, info in infos:
            check_persistence(info, durability, address)
        self._persistence_checked = True

    async def _batched(
        self,
        script: Script,
        items: Sequence[Sequence[Arg]],
        size: int,
        width: int,
        head: Sequence[Arg] = (),
        durability: Durability | None = None,
        ids: Sequence[str] = (),
        argv: Callable[[int, int], list[Arg]] | None = None,
    ) -> tuple[list[Any], EchoMQError | None]:
        """Run ``script`` over ``items`` in chunks of ``size``, pipelined, each call's ``ARGV``
        opening with ``head`` (or, given ``argv``, built by it from a chunk's start and stop).
        Each item's reply in order: the ``width`` values the script answers for it (one value
        when ``width`` is 1), or the failure of the call that carried it. With
        ``durability``, the chunks and one ``WAITAOF`` go out as one pipeline on one
        connection; the second value is the shortfall of that wait (None: confirmed)."""
        spans = [(start, min(start + size, len(items))) for start in range(0, len(items), size)]
        if argv is None:
            calls = [
                (script, self._keys, [*head, *(arg for item in items[start:stop] for arg in item)])
                for start, stop in spans
            ]
        else:
            calls = [(script, self._keys, argv(start, stop)) for start, stop in spans]
        short: EchoMQError | None = None
        replies: list[Any]
        if durability is not None:
            await self.check_persistence()
            replies, waits = await self.registry.run_durable(self.wire, calls, durability.command())
            short = durability.shortfall(waits, ids)
        elif len(calls) == 1:
            try:
                replies = [await self.registry.run(self.wire, *calls[0])]
            except EchoMQError as exc:
                replies = [exc]
        else:
            # One pipeline per call: each carries a whole chunk, and an answered one is kept.
            replies = await self.registry.run_many(self.wire, calls, per_pipeline=1)
        out: list[Any] = []
        for (start, stop), reply in zip(spans, replies, strict=True):
            if isinstance(reply, EchoMQError):
                out += [reply] * (stop - start)
            elif width == 1:
                out += reply
            else:
                out += [reply[i : i + width] for i in range(0, len(reply), width)]
        return out, short

    # -- admission and settles (batch-native: k items per call) ---------------------------------

    async def enqueue(
        self, items: Sequence[Admission], fence: Fence | None = None
    ) -> list[Admitted]:
        """Admit ``items`` in chunks of :data:`ADMIT_CHUNK`; one answer per item, in order. On a
        shard of a sharded queue ``fence`` carries the producer's epoch and each item's lane
        slot: an item of a lane the shard does not serve answers
        :class:`~echomq.errors.LaneMoved`."""
        if self.durability is not None:
            (admitted,) = await enqueue_together([(self, items, fence)])
            return admitted
        replies, _ = await self._batched(
            self._enqueue,
            items,
            ADMIT_CHUNK,
            3,
            argv=lambda a, b: admission_argv(items[a:b], fence and fence.part(a, b)),
        )
        return [r if isinstance(r, EchoMQError) else _admitted(*r) for r in replies]

    async def enqueue_one(
        self, item: Admission, fence: Fence | None = None
    ) -> tuple[int, str, str]:
        """Admit one item (``fence``: as :meth:`enqueue`'s); its refusal is raised, and so is a
        durability's shortfall (:class:`NotDurable`, after the write)."""
        if self.durability is not None:
            (reply,) = await self.enqueue([item], fence)
        else:
            args = admission_argv([item], fence)
            reply = _admitted(*await self.registry.run(self.wire, self._enqueue, self._keys, args))
        if isinstance(reply, EchoMQError):
            raise reply
        return reply

    async def complete(self, jobs: Sequence[Success], ttl_ms: int = 0) -> list[SettleCode]:
        """Complete jobs, keeping each row (with its result) ``ttl_ms`` when > 0, else deleting
        it; per job 1 completed, 0 gone, -1 stale, -2 settled."""
        return await self._settle(self._complete, jobs, (ttl_ms,))

    async def retry(self, failures: Sequence[Failure]) -> list[SettleCode]:
        """Retry or bury failed jobs; per job 1 scheduled, 2 dead, 3 cancelled (a cancel marked
        it), 0 gone, -1 stale, -2 settled."""
        return await self._settle(self._retry, failures)

    async def _settle(
        self, script: Script, jobs: Sequence[Success] | Sequence[Failure], head: Sequence[Arg] = ()
    ) -> list[SettleCode]:
        durability = self._settles_durable
        ids = [job.id for job in jobs] if durability else ()
        codes, short = await self._batched(script, jobs, SETTLE_CHUNK, 1, head, durability, ids)
        if short is None:
            return codes
        # Codes > 0 wrote (completed, scheduled, dead, cancelled); the others wrote nothing.
        return [short if not isinstance(c, EchoMQError) and c > 0 else c for c in codes]

    # -- claim and leases ----------------------------------------------------------------------

    async def claim(
        self, lease_ms: int, want: int, one_lane: bool = False, load: bool = False
    ) -> Claimed | int | None:
        """Lease up to ``want`` jobs (``one_lane``: all of the head lane); else None (empty),
        > 0 (queue rate-limited for that many ms) or <= 0 (empty; a benched lane returns in
        ``-reply`` ms). ``load`` (a sharded queue's): the leases come with the shard's load
        (:attr:`Claimed.load`)."""
        if load:
            args: tuple[int, ...] = (lease_ms, want, int(one_lane), 1)
        else:
            args = (lease_ms, want, 1) if one_lane else (lease_ms, want)
        reply = await self.registry.run(self.wire, self._claim, self._keys, args)
        if type(reply) is not list:
            return None if reply is None else int(reply)
        if not load:
            return Claimed(int(reply[0]), reply[1] == 1, reply)
        band, weight, due = reply[-3:]
        del reply[-3:]
        return Claimed(int(reply[0]), reply[1] == 1, reply, (int(band), int(weight), int(due)))

    async def delay(self, job_id: str, token: int, delay_ms: int) -> int:
        """Re-schedule a held job without counting a failure: 1 scheduled, 2 cancelled (a
        cancel marked it), 0 gone (refusals raise)."""
        args = (job_id, token, delay_ms)
        return int(await self.registry.run(self.wire, self._delay, self._keys, args))

    async def cancel(self, job_id: str, reason: str, ttl_ms: int) -> str:
        """Cancel a job: the state it was in ("" for none); pending and scheduled jobs end
        ``cancelled``, a leased one is marked and its holder told (cancel.lua)."""
        return text(await self._run(self._cancel, (job_id, reason, ttl_ms, "")))

    async def cancel_held(self, job_id: str, token: int, ttl_ms: int, reason: str = "") -> int:
        """The holder ends its job as cancelled: 1 cancelled, 0 gone, -1 stale, -2 settled."""
        return int(await self._run(self._cancel, (job_id, reason, ttl_ms, token)))

    async def extend(self, lease_ms: int, jobs: Sequence[tuple[str, int]]) -> list[int]:
        """Extend ``(id, token)`` leases on one TIME; per job 1 extended, 0 gone, -1 stale."""
        args: list[Arg] = [lease_ms]
        for pair in jobs:
            args += pair
        return [int(code) for code in await self._run(self._extend, args)]

    async def progress(
        self, job_id: str, token: int, value: str | None, lines: Sequence[str], keep: int
    ) -> bool:
        """Set a held job's progress (JSON text; None leaves it) and append ``lines`` to its
        log, keeping the newest ``keep``; False when gone (a stale token raises)."""
        args: list[Arg] = [job_id, token, 0 if value is None else 1, value or "", keep, *lines]
        return bool(await self._run(self._progress, args))

    # -- time ----------------------------------------------------------------------------------

    async def promote(self, limit: int) -> tuple[int, int]:
        """Move due scheduled jobs to their lanes, ring benched lanes: ``(moved, lanes)``."""
        moved, lanes = await self._run(self._promote, (limit,))
        return int(moved), int(lanes)

    async def tick(self, limit: int, reap_limit: int, max_stalled: int) -> TickReply:
        """Promote, then reap, in one call."""
        moved, lanes, recovered, dead, due, outbox = await self._run(
            self._tick, (limit, reap_limit, max_stalled)
        )
        return TickReply(
            int(moved),
            int(lanes),
            [text(i) for i in recovered],
            [text(i) for i in dead],
            due,
            int(outbox),
        )

    async def reap(self, limit: int, max_stalled: int) -> tuple[list[str], list[str]]:
        """Return expired leases to their lanes: ``(recovered ids, dead ids)``."""
        recovered, dead = await self._run(self._reap, (limit, max_stalled))
        return [text(i) for i in recovered], [text(i) for i in dead]

    # -- flows ---------------------------------------------------------------------------------

    async def flow(
        self, nodes: Sequence[Sequence[Arg]], fence: Fence | None = None
    ) -> tuple[bool, str]:
        """Admit a flow's nodes of this queue, all or nothing (seven values each, see
        flow.lua): ``(True, "")`` admitted, ``(False, id)`` that node existed: nothing written.
        On a shard ``fence`` carries each node's lane slot: a node of a lane the shard does not
        serve raises :class:`~echomq.errors.LaneMoved`, nothing written."""
        args = admission_argv(nodes, fence)
        if self.durability is None:
            code, detail = await self._run(self._flow, args)
        else:
            code, detail = await self._run_durable(self._flow, args, [str(n[0]) for n in nodes])
        return int(code) == 1, text(detail) if int(code) == 0 else ""

    async def flow_deliver(self, entries: Sequence[Sequence[Arg]]) -> list[int]:
        """Tell this queue's waiting parents of children settled elsewhere (six values per
        outbox entry, see flow_deliver.lua): per entry 1 counted, 0 done with, -1 keep it."""
        args = [arg for entry in entries for arg in entry]
        return [int(code) for code in await self._run(self._flow_deliver, args)]

    # -- reads and settings --------------------------------------------------------------------

    async def counts(self) -> list[int]:
        """pending, active, scheduled, dead, completed, failed, lanes, ringed, waiting."""
        return [int(n) for n in await self._run(self._counts)]

    async def has_work(self, horizon_ms: int) -> bool:
        """Whether a worker can still get to something (see work.lua), in one atomic read."""
        return bool(int(await self._run(self._work, (horizon_ms,))))

    async def lanes(self, groups: Sequence[str]) -> list[list[Any]]:
        """Twelve raw fields per lane (see lanes.lua), for ``groups`` or every lane."""
        flat = await self._run(self._lanes, groups)
        return [flat[i : i + 12] for i in range(0, len(flat), 12)]

    async def eta(self, job_id: str, group: str) -> list[Any] | None:
        """What a wait depends on (see eta.lua): for job ``job_id`` (None when it waits in no
        lane), else for a job enqueued now on ``group``, else ("", "") for every lane."""
        reply = await self._run(self._eta, (job_id, group))
        return None if reply is None else list(reply)

    async def configure(self, settings: Sequence[Arg]) -> int:
        """Set queue-wide ``field, value`` pairs ("" clears one); how many changed."""
        return int(await self._run(self._configure, settings))

    async def lane_setting(self, group: str, field: str, value: Arg) -> bool:
        """Set one lane's ``glimit``, ``gweight``, ``grate`` or ``gcap`` ("" clears it); False
        when it held that value already (nothing written)."""
        return bool(await self._run(self._lane_limit, (group, field, value)))

    async def quota(self, op: str, *args: Arg) -> Any:
        """quota.lua's ``op`` (hold, release, read, give, take, set) on this queue's keyspace:
        a shard's part of a sharded queue's queue-wide gates (echomq.engine.rebalancer)."""
        return await self._run(self._quota, (op, *args))

    async def policy(self, args: Sequence[Arg]) -> int:
        """Apply lane policies (``policy.lua``'s ARGV); how many settings changed."""
        return int(await self._run(self._policy, args))

    async def pause_lane(self, group: str) -> bool:
        return bool(await self._run(self._pause, (group,)))

    async def resume_lane(self, group: str) -> bool:
        return bool(await self._run(self._resume, (group,)))

    async def cool_lane(
        self, group: str, at: int, mode: str, job: tuple[str, int] | None = None
    ) -> tuple[bool, int, int]:
        """Cool ``group`` until ``at`` (ms from now, mode "in"; server epoch ms, mode "at"),
        putting the leased ``job`` (id, token) back in its lane in the same step (cool.lua):
        whether the cool end moved, the job's code, the server epoch ms the lane cools until."""
        args: tuple[Arg, ...] = (group, at, mode) if job is None else (group, at, mode, *job)
        cooled, code, until = await self._run(self._cool, args)
        return bool(cooled), int(code), int(until)

    async def uncool_lane(self, group: str) -> bool:
        return bool(await self._run(self._uncool, (group,)))

    # -- cleanup -------------------------------------------------------------------------------

    async def drain(
        self, group: str, schedule: bool, budget: int, results: bool = False
    ) -> tuple[int, bool]:
        """Delete up to ``budget`` pending (and scheduled, and kept completed) jobs:
        ``(deleted, more)``."""
        args = (group, int(schedule), budget, int(results))
        deleted, more = await self._run(self._drain, args)
        return int(deleted), bool(more)

    async def obliterate(self, force: bool, budget: int) -> bool:
        """Delete up to ``budget`` rows of the queue; True while more remain."""
        return bool(await self._run(self._obliterate, (int(force), budget)))

    async def remove(self, job_id: str) -> bool:
        return bool(await self._run(self._remove, (job_id,)))

    async def reassign(self, job_id: str, group: str, fence: Fence | None = None) -> bool:
        """Move a pending job to lane ``group`` (on a shard, ``fence`` carries that lane's slot:
        a lane the shard does not serve raises :class:`~echomq.errors.LaneMoved`, nothing
        written)."""
        return bool(await self._run(self._reassign, admission_argv([(job_id, group)], fence)))

    async def reprocess(self, job_id: str) -> bool:
        return bool(await self._run(self._reprocess, (job_id,)))

    async def cover(self, ids: Sequence[str]) -> EchoMQError | None:
        """A durable queue's cover of jobs ``ids`` that other connections wrote, when an answer
        points at them without writing (a duplicate found by a read): the durability's mark
        written and waited for, which covers every earlier write on its server. None when
        the wait confirmed it, else the shortfall."""
        assert self.durability is not None
        return await _marked(self.wire, self.durability, (self.keys.fsync,), ids)

    async def reprocess_fenced(self, job_id: str, fence: Fence) -> Any:
        """:meth:`reprocess` on a shard, ``fence`` carrying the slot of the row's lane: 1 or 0
        as unfenced, or, when the shard no longer serves that lane, reprocess.lua's refusal
        (``[refusal, row pairs, log lines, dedup ttl]``, nothing written)."""
        return await self._run(self._reprocess, admission_argv([(job_id,)], fence))

    async def _run_durable(self, script: Script, args: Sequence[Arg], ids: Sequence[str]) -> Any:
        """One script call followed by its durability's wait; its refusal or the wait's
        shortfall (after the write) raised."""
        assert self.durability is not None
        await self.check_persistence()
        calls = [(script, self._keys, args)]
        (reply,), waits = await self.registry.run_durable(
            self.wire, calls, self.durability.command()
        )
        if isinstance(reply, EchoMQError):
            raise reply
        short = self.durability.shortfall(waits, ids)
        if short is not None:
            raise short
        return reply

    def _run(self, script: Script, args: Sequence[Arg] = ()) -> Awaitable[Any]:
        return self.registry.run(self.wire, script, self._keys, args)


async def enqueue_together(
    parts: Sequence[tuple[Engine, Sequence[Admission], Fence | None]],
) -> list[list[Admitted]]:
    """Durable admissions of the engines of one connection (the shards of a sharded queue
    that one server, or one cluster primary, holds): every part's chunks in one pipeline and
    one ``WAITAOF`` after them all, which covers every write before it on the connection — not
    a wait per part, each blocking the connection in turn. Each part's answers, in order (as
    :meth:`Engine.enqueue`'s, which is this with one part).

    The parts share the first's wire and durability. When some item answered ``duplicate``,
    the batch's wait did not cover the job it points at (another connection wrote it): one
    mark per engine that met one, written and waited for, covers it (and all before it)."""
    first = parts[0][0]
    durability = first.durability
    assert durability is not None
    assert all(e.wire is first.wire for e, _, _ in parts)
    await first.check_persistence()  # one wire: one engine's check is every part's
    calls: list[tuple[Script, Sequence[Arg], Sequence[Arg]]] = []
    sizes: list[int] = []
    for engine, items, fence in parts:
        engine._persistence_checked = True
        for a in range(0, len(items), ADMIT_CHUNK):
            b = min(a + ADMIT_CHUNK, len(items))
            argv = admission_argv(items[a:b], fence and fence.part(a, b))
            calls.append((engine._enqueue, engine._keys, argv))
            sizes.append(b - a)
    replies, waits = await first.registry.run_durable(first.wire, calls, durability.command())
    admitted: list[Admitted] = []
    for size, reply in zip(sizes, replies, strict=True):
        if isinstance(reply, EchoMQError):
            admitted += [reply] * size
        else:
            admitted += [_admitted(*reply[i : i + 3]) for i in range(0, len(reply), 3)]
    short = durability.shortfall(waits, [item.id for _, items, _ in parts for item in items])
    if short is not None:
        # The wait fell short: every item written (not refused) may not survive a crash.
        admitted = [a if isinstance(a, EchoMQError) else short for a in admitted]
    out: list[list[Admitted]] = []
    for _, items, _ in parts:
        out.append(admitted[: len(items)])
        admitted = admitted[len(items) :]
    if short is not None:
        return out
    marked = [(e, part) for (e, _, _), part in zip(parts, out, strict=True) if _duplicates(part)]
    if not marked:
        return out
    fsyncs = [e.keys.fsync for e, _ in marked]
    duplicates = [d for _, part in marked for d in _duplicates(part)]
    short = await _marked(first.wire, durability, fsyncs, duplicates)
    if short is None:
        return out
    return [[short if not isinstance(a, EchoMQError) and a[0] == 0 else a for a in p] for p in out]


async def _marked(
    wire: Wire, durability: Durability, fsyncs: Sequence[str], ids: Sequence[str]
) -> EchoMQError | None:
    """The durability's mark written to each of ``fsyncs`` and waited for, which covers every
    earlier write on the connection (jobs ``ids``, written by others): None when the wait
    confirmed it, else the shortfall (or the call's error)."""
    try:
        *_, wait = await call_durable(
            wire, [durability.mark(fsync) for fsync in fsyncs], durability.command()
        )
    except EchoMQError as exc:
        return exc
    return durability.shortfall([wait], ids)


def _duplicates(admitted: Sequence[Admitted]) -> list[str]:
    """The ids the ``duplicate`` answers among ``admitted`` point at."""
    return [a[1] for a in admitted if not isinstance(a, EchoMQError) and a[0] == 0]


def _admitted(code: int, detail: Any, state: Any = b"") -> Admitted:
    """One item's three reply values: ``(code, id, state)``, or its refusal (code -1)."""
    return server_error(text(detail)) if code == -1 else (int(code), text(detail), text(state))

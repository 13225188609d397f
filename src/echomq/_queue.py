"""The queue: admission, claim, settle and time — each a call of one Lua transition.

Every public call validates its arguments before any wire traffic and says what was wrong;
normal outcomes (duplicate, empty, rate-limited) are values. Durations are seconds (``float``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import time
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import _ids
from ._admin import QueueAdmin
from ._checks import (
    MAX_ATTEMPTS,
    MAX_BATCH,
    MAX_DURATION,
    MAX_LEASE,
    MAX_LIMIT,
    MAX_PAYLOAD,
    MAX_TOKEN,
    MAX_UNIX_SECONDS,
    count,
    error_text,
    ms,
    text,
)
from ._codec import Codec, JsonCodec
from ._connector import Arg, Command
from ._errors import EchoMQError, InvalidArgument, StaleTokenError, WireError
from ._events import Subscription
from ._keys import DEFAULT_GROUP, Keyspace, validate_dedup, validate_group
from ._pool import Wire, dedicated
from ._results import Empty, Job, RateLimited, Reaped, Upkeep, Verdict, VerdictKind
from ._scripts import ScriptRegistry
from ._url import ConnectionOptions, seeds_from_url

_VERDICTS: dict[int, VerdictKind] = {0: "duplicate", 1: "enqueued", 2: "scheduled"}
DEFAULT_LEASE = 30.0
_UNSENT = Verdict("error", "")  # a placeholder until the pipeline answers
LISTENER_CHECK_INTERVAL = 1.0  # seconds between PUBSUB NUMSUB checks of the events channel


@dataclass(frozen=True, slots=True)
class Item:
    """One job for :meth:`Queue.enqueue_many`. ``delay`` (seconds) schedules it for later."""

    payload: Any
    group: str | None = None
    id: str | None = None
    dedup_key: str | None = None
    delay: float | None = None


def _swallow(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # fire-and-forget: retrieve, so nothing logs "never retrieved"


class Queue(QueueAdmin):
    """One named queue on a wire (a connector, a pool, or a cluster router).

    ``Queue.connect(url, name)`` opens and owns a pool; ``Queue(name, wire)`` shares yours.
    """

    def __init__(
        self,
        name: str,
        wire: Wire,
        *,
        codec: Codec | None = None,
        minter: _ids.Minter | None = None,
        scripts: ScriptRegistry | None = None,
        events: bool = True,
    ) -> None:
        self.keys = Keyspace(name)
        self.name = name
        self.wire = wire
        self.codec = codec or JsonCodec()
        # No minter given: one whose node is leased from the engine at the first mint, so
        # producers in many processes never mint the same id (docs/reference.md, "Ids").
        self.minter = minter if minter is not None else _ids.Minter.leased(wire)
        self._owns_minter = minter is None
        self.scripts = scripts or ScriptRegistry.from_package()
        self.publishes_events = events
        # KEYS[1] is the root every script builds on; the gate rides along for slot migrations.
        self._root = (self.keys.root, self.keys.gate)
        # Events go out only while someone listens: PUBSUB NUMSUB is asked at most once a
        # second, so a busy queue with no subscriber pays nothing for its events.
        self._has_listeners = False
        self._listeners_checked_at = -math.inf
        self._subscribed_at = -math.inf
        self._owns_wire = False
        # On a cluster, events ride sharded pub/sub on the queue's own slot.
        self._sharded = bool(getattr(wire, "is_cluster", False))
        self._publish = "SPUBLISH" if self._sharded else "PUBLISH"
        self._numsub = "SHARDNUMSUB" if self._sharded else "NUMSUB"

    @classmethod
    async def connect(
        cls, url: str | ConnectionOptions, name: str, *, pool_size: int = 1, **options: Any
    ) -> Queue:
        """Open a pool to ``url`` and a queue on it; :meth:`close` closes the pool.

        One connector is the default: it pipelines without bound, and a wider pool measured
        slower within one process (docs/consumers.md, "The pool"). A cluster (several seeds
        in ``url``, or a server with ``cluster_enabled:1``) gets a cluster router instead.
        """
        from ._cluster import open_wire  # the router builds on the pool: imported late

        Keyspace(name)  # validates before connecting
        seeds = [url] if isinstance(url, ConnectionOptions) else seeds_from_url(url)
        wire = await open_wire(seeds, pool_size)
        try:
            queue = cls(name, wire, **options)
        except BaseException:
            await wire.close()
            raise
        queue._owns_wire = True
        return queue

    async def close(self) -> None:
        """Give back the minter's node lease (when the queue made its minter) and close the
        wire (when :meth:`connect` opened it)."""
        if self._owns_minter:
            await self.minter.release()
        if self._owns_wire:
            await self.wire.close()

    async def __aenter__(self) -> Queue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    # -- plumbing ------------------------------------------------------------------------------

    def _run(self, script: str, args: Sequence[Arg] = ()) -> Awaitable[Any]:
        return self.scripts.run(self.wire, script, self._root, args)

    def _listened(self) -> bool:
        """Whether events should go out now; asks the server at most once a second."""
        if not self.publishes_events:
            return False
        now = asyncio.get_running_loop().time()
        if now - self._listeners_checked_at >= LISTENER_CHECK_INTERVAL:
            self._listeners_checked_at = now
            asked = asyncio.ensure_future(self.wire.call("PUBSUB", self._numsub, self.keys.events))
            asked.add_done_callback(functools.partial(self._listeners_counted, now))
        return self._has_listeners

    def _emit(self, events: Iterable[dict[str, Any]]) -> None:
        """Publish lifecycle events host-side, fire-and-forget (at most once)."""
        commands: list[Command] = [
            (self._publish, self.keys.events, json.dumps(event, separators=(",", ":")))
            for event in events
        ]
        if not commands:
            return
        sent = asyncio.ensure_future(self.wire.call_many(commands))
        sent.add_done_callback(_swallow)

    def _listeners_counted(self, asked_at: float, asked: asyncio.Future[Any]) -> None:
        if asked.cancelled() or asked.exception() is not None:
            return
        # A subscribe() in this process after the question was sent outranks its answer.
        self._has_listeners = int(asked.result()[1]) > 0 or self._subscribed_at >= asked_at

    def publish(self, event: str, job: str, **extra: str | int | float | bool | None) -> None:
        """Publish an application event (say ``scored``) on this queue's event channel.

        Fire-and-forget and at most once, like the lifecycle events: it goes out only while
        someone subscribes (checked at most once a second), and a failure is not raised.
        """
        if not isinstance(event, str) or not event:
            raise InvalidArgument("event", event, "must be a non-empty name")
        job_id = _ids.validate(job, argument="job id")
        if self._listened():
            self._emit([{"event": event, "job": job_id, **extra}])

    def subscribe(self) -> Subscription:
        """A subscriber of this queue's lifecycle events, on a connection of its own."""
        self._has_listeners = True  # publish at once; the next check will see the subscriber
        self._subscribed_at = self._listeners_checked_at = asyncio.get_running_loop().time()
        return Subscription(
            self.wire.options,
            self.keys.events,
            sharded=self._sharded,
            connect=functools.partial(dedicated, self.wire, self.keys.events),
        )

    # -- admission -----------------------------------------------------------------------------

    def _admission(
        self,
        payload: Any,
        group: str | None,
        id: str | None,
        dedup_key: str | None,
        dedup_ttl: float | None,
        run_at: int,
    ) -> list[Arg]:
        data = self.codec.encode(payload)
        if len(data) > MAX_PAYLOAD:
            raise InvalidArgument(
                "payload", f"<{len(data)} bytes>", f"encodes to more than {MAX_PAYLOAD} bytes"
            )
        lane = DEFAULT_GROUP if group is None else validate_group(group)
        dedup = "" if dedup_key is None else validate_dedup(dedup_key)
        ttl = 0 if dedup_ttl is None else ms(dedup_ttl, "dedup_ttl", positive=True)
        job_id = self.minter.mint("JOB") if id is None else _ids.validate(id, "JOB", "job id")
        return [job_id, data, lane, run_at, dedup, ttl]

    def _verdict(self, reply: Any, job_id: Arg) -> Verdict:
        if isinstance(reply, WireError):
            return Verdict("unknown", str(job_id), reply)
        if isinstance(reply, EchoMQError):
            return Verdict("error", str(job_id), reply)
        return Verdict(_VERDICTS[reply[0]], text(reply[1]))

    async def _admit(
        self,
        payload: Any,
        group: str | None,
        id: str | None,
        dedup_key: str | None,
        dedup_ttl: float | None,
        run_at: int,
    ) -> Verdict:
        if id is None and not self.minter.is_ready:
            await self.minter.ready()
        args = self._admission(payload, group, id, dedup_key, dedup_ttl, run_at)
        verdict = self._verdict(await self._run("enqueue", args), args[0])
        if verdict.kind != "duplicate" and self._listened():
            self._emit([{"event": verdict.kind, "job": verdict.id, "group": args[2]}])
        return verdict

    async def enqueue(
        self,
        payload: Any,
        *,
        group: str | None = None,
        id: str | None = None,
        dedup_key: str | None = None,
        dedup_ttl: float | None = None,
    ) -> Verdict:
        """Admit a job to its lane (``group``; default lane ``_``). Idempotent by id and dedup key.

        ``id`` must be a ``JOB`` branded id (minted when omitted). A ``dedup_key`` maps to the
        job until its row is deleted (or for ``dedup_ttl`` seconds at most).
        """
        return await self._admit(payload, group, id, dedup_key, dedup_ttl, 0)

    async def enqueue_in(self, delay: float, payload: Any, **options: Any) -> Verdict:
        """Admit a job that becomes claimable ``delay`` seconds from now (server clock)."""
        run_at = -ms(delay, "delay")
        return await self._admit(payload, **_admission_options(options), run_at=run_at)

    async def enqueue_at(self, when: float, payload: Any, **options: Any) -> Verdict:
        """Admit a job that becomes claimable at ``when`` (Unix seconds; a past ``when`` runs
        now). At most 10 years ahead; a millisecond timestamp is refused, not read as seconds."""
        run_at = _run_at(when)
        return await self._admit(payload, **_admission_options(options), run_at=run_at)

    async def enqueue_many(self, items: Iterable[Item | Any]) -> list[Verdict]:
        """Admit many jobs in one pipelined flush; one verdict per item, in input order.

        Each item is atomic and idempotent; the batch is not a transaction. An item that fails
        validation gets an ``error`` verdict and is not sent; the others are. When the
        connection drops mid-batch, the answered items keep their verdicts and the rest answer
        ``unknown`` (nothing is raised): send those again with their verdict's ``id``.
        """
        if not self.minter.is_ready:
            await self.minter.ready()
        verdicts: list[Verdict] = []
        sent: list[tuple[int, list[Arg]]] = []  # (position in verdicts, script args)
        for item in items:
            if not isinstance(item, Item):
                item = Item(item)
            try:
                run_at = 0 if item.delay is None else -ms(item.delay, "delay")
                args = self._admission(
                    item.payload, item.group, item.id, item.dedup_key, None, run_at
                )
            except InvalidArgument as exc:
                verdicts.append(Verdict("error", str(item.id or ""), exc))
                continue
            sent.append((len(verdicts), args))
            verdicts.append(_UNSENT)
        if sent:
            calls = [("enqueue", self._root, args) for _, args in sent]
            replies = await self.scripts.run_many(self.wire, calls)
            for (position, args), reply in zip(sent, replies, strict=True):
                verdicts[position] = self._verdict(reply, args[0])
        if self._listened():
            self._emit(
                {"event": v.kind, "job": v.id}
                for v in verdicts
                if v.kind in ("enqueued", "scheduled")
            )
        return verdicts

    # -- claim ---------------------------------------------------------------------------------

    async def claim_some(
        self, n: int, lease: float = DEFAULT_LEASE
    ) -> tuple[list[Job], bool] | Empty | RateLimited:
        """:meth:`claim_batch`, plus whether some lane was still serviceable afterwards (a
        consumer that sees ``False`` parks instead of spending a claim to learn it)."""
        lease_ms = ms(lease, "lease", positive=True, most=MAX_LEASE)
        reply = await self._run("claim", (lease_ms, count(n, "n", maximum=MAX_BATCH)))
        if type(reply) is not list:
            return _not_claimed(reply)
        deadline, more = int(reply[0]), reply[1] == 1
        decode, name = self.codec.decode, self.name
        jobs = [
            Job(
                text(reply[i]),
                decode(reply[i + 1]),
                int(reply[i + 2]),
                text(reply[i + 3]),
                deadline,
                name,
            )
            for i in range(2, len(reply), 4)
        ]
        if self._listened():
            self._emit({"event": "active", "job": j.id, "attempts": j.attempts} for j in jobs)
        return jobs, more

    async def claim(self, lease: float = DEFAULT_LEASE) -> Job | Empty | RateLimited:
        """Lease the next job by fair rotation of the lanes, or say why there is none."""
        outcome = await self.claim_some(1, lease)
        return outcome[0][0] if isinstance(outcome, tuple) else outcome

    async def claim_batch(
        self, n: int, lease: float = DEFAULT_LEASE
    ) -> list[Job] | Empty | RateLimited:
        """Lease up to ``n`` jobs on one lease, walking the ring as ``n`` single claims would:
        each lane gives what is left of its turn (weights hold), clamped to every headroom."""
        outcome = await self.claim_some(n, lease)
        return outcome[0] if isinstance(outcome, tuple) else outcome

    # -- settle --------------------------------------------------------------------------------

    async def complete(self, job: Job | str, token: int | None = None) -> bool:
        """Settle a success: the row is deleted. False when the job is already gone.

        Raises :class:`StaleTokenError` when another claim holds the job now.
        """
        job_id, token = _ref(job, token)
        done = bool(await self._run("complete", (job_id, token)))
        if done and self._listened():
            self._emit([{"event": "completed", "job": job_id}])
        return done

    async def complete_many(self, jobs: Iterable[Job]) -> list[bool]:
        """Complete many leased jobs in one pipelined flush (e.g. a claimed batch).

        One answer per job, in order: True completed, False gone. A stale token raises
        :class:`StaleTokenError` after every other job in the batch was settled.
        """
        batch = list(jobs)
        if not batch:
            return []
        calls = [("complete", self._root, _ref(job, None)) for job in batch]
        replies = await self.scripts.run_many(self.wire, calls)
        if self._listened():
            self._emit(
                {"event": "completed", "job": j.id}
                for j, r in zip(batch, replies, strict=True)
                if r == 1
            )
        for reply in replies:
            if isinstance(reply, EchoMQError):
                raise reply
        return [bool(reply) for reply in replies]

    async def retry(
        self,
        job: Job | str,
        token: int | None = None,
        *,
        delay: float = 0.0,
        max_attempts: int = 3,
        error: str = "",
    ) -> Literal["scheduled", "dead", "gone"]:
        """Settle a failure: schedule the next attempt after ``delay``, or dead-letter the job
        once it failed ``max_attempts`` times (delays do not count as failures)."""
        job_id, token = _ref(job, token)
        failure = error_text(error)
        attempts = count(max_attempts, "max_attempts", maximum=MAX_ATTEMPTS)
        args = (job_id, token, ms(delay, "delay"), attempts, failure)
        outcome = ("gone", "scheduled", "dead")[await self._run("retry", args)]
        if outcome != "gone" and self._listened():
            event = "retrying" if outcome == "scheduled" else "dead"
            self._emit([{"event": event, "job": job_id, "error": failure[:200]}])
        return outcome  # type: ignore[return-value]

    async def delay(self, job: Job | str, token: int | None = None, *, delay: float) -> bool:
        """Re-schedule a leased job ``delay`` seconds from now without counting a failure."""
        job_id, token = _ref(job, token)
        moved = bool(await self._run("delay", (job_id, token, ms(delay, "delay", positive=True))))
        if moved and self._listened():
            self._emit([{"event": "delayed", "job": job_id}])
        return moved

    async def extend(self, job: Job | str, token: int | None = None, *, lease: float) -> bool:
        """Push a lease to now + ``lease``. False when the job is gone or no longer leased."""
        job_id, token = _ref(job, token)
        lease_ms = ms(lease, "lease", positive=True, most=MAX_LEASE)
        code = (await self._run("extend", (lease_ms, job_id, token)))[0]
        if code == -1:
            raise StaleTokenError(f"EMQSTALE extend token mismatch for {job_id}")
        return bool(code == 1)

    async def extend_many(
        self, jobs: Iterable[Job | tuple[str, int]], *, lease: float
    ) -> list[str]:
        """Extend many leases on one server TIME; returns the ids that could not be extended."""
        pairs = [
            _ref(job[0], job[1]) if isinstance(job, tuple) else _ref(job, None) for job in jobs
        ]
        if not pairs:
            return []
        args: list[Arg] = [ms(lease, "lease", positive=True, most=MAX_LEASE)]
        for job_id, token in pairs:
            args += [job_id, token]
        codes = await self._run("extend", args)
        return [job_id for (job_id, _), code in zip(pairs, codes, strict=True) if code != 1]

    # -- time ----------------------------------------------------------------------------------

    async def promote(self, limit: int = 1000) -> int:
        """Move due scheduled jobs back to their own lanes; return rate-limited lanes whose
        window ended to the ring. Returns the number of jobs moved."""
        moved, _lanes = await self._run("promote", (count(limit, "limit", maximum=MAX_LIMIT),))
        return int(moved)

    async def upkeep(self, limit: int = 1000, max_stalled: int = 3) -> Upkeep:
        """The beat's work in one script: :meth:`promote`, then :meth:`reap`."""
        moved, lanes, recovered, dead, due = await self._run(
            "tick",
            (
                count(limit, "limit", maximum=MAX_LIMIT),
                min(limit, 100),
                count(max_stalled, "max_stalled", maximum=MAX_ATTEMPTS),
            ),
        )
        result = Upkeep(
            int(moved),
            int(lanes),
            Reaped([text(i) for i in recovered], [text(i) for i in dead]),
            None if due < 0 else due / 1000,
        )
        if result.reaped.recovered or result.reaped.dead:
            self._emit_reaped(result.reaped)
        return result

    async def reap(self, limit: int = 100, max_stalled: int = 3) -> Reaped:
        """Return expired leases to their lanes; dead-letter jobs that stalled ``max_stalled``
        times (``last_error`` = ``stalled``)."""
        recovered, dead = await self._run(
            "reap",
            (
                count(limit, "limit", maximum=MAX_LIMIT),
                count(max_stalled, "max_stalled", maximum=MAX_ATTEMPTS),
            ),
        )
        result = Reaped([text(i) for i in recovered], [text(i) for i in dead])
        self._emit_reaped(result)
        return result

    def _emit_reaped(self, reaped: Reaped) -> None:
        if self._listened():
            self._emit(
                [{"event": "stalled", "job": i} for i in reaped.recovered]
                + [{"event": "dead", "job": i, "error": "stalled"} for i in reaped.dead]
            )


def _run_at(when: float) -> int:
    """``enqueue_at``'s Unix seconds as engine ms, refusing milliseconds and the far future."""
    if isinstance(when, int | float) and not isinstance(when, bool) and when > MAX_UNIX_SECONDS:
        raise InvalidArgument(
            "when", when, "looks like milliseconds: enqueue_at takes Unix seconds (time.time())"
        )
    return ms(when, "when", positive=True, most=time.time() + MAX_DURATION)


def _admission_options(options: dict[str, Any]) -> dict[str, Any]:
    allowed = {"group", "id", "dedup_key", "dedup_ttl"}
    unknown = set(options) - allowed
    if unknown:
        raise InvalidArgument(
            "option", sorted(unknown)[0], f"allowed: {', '.join(sorted(allowed))}"
        )
    return {name: options.get(name) for name in allowed}


def _ref(job: Job | str, token: int | None) -> tuple[str, int]:
    if isinstance(job, Job):
        return job.id, job.attempts if token is None else token
    if token is None:
        raise InvalidArgument("token", token, "settling by id needs the token the claim returned")
    if isinstance(token, bool) or not isinstance(token, int) or not 1 <= token <= MAX_TOKEN:
        raise InvalidArgument("token", token, "must be the positive attempts value of the claim")
    return _ids.validate(job, "JOB", "job id"), token


def _not_claimed(reply: Any) -> Empty | RateLimited:
    if reply is None:
        return Empty()
    if reply > 0:
        return RateLimited(reply / 1000)
    return Empty(retry_in=-reply / 1000)

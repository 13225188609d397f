"""The blocking producer: :class:`SyncQueue`, the producer verbs and reads of a queue without an
event loop, for WSGI apps, scripts and the task layer's ``enqueue_sync``.

Same arguments, checks, Lua scripts and verdicts as :class:`echomq.Queue` (the pure pieces are
shared, in ``engine/producer.py``); each thread talks on a socket of its own
(``wire/blocking.py``); ids come from a node leased from the engine like the async minter's
(``sync_process.py``: what a process holds); the reads are ``sync_reads.py``'s, whose
``wait`` subscribes on a socket of its own (``sync_waiter.py``). Fork-safe: a child notices
the new pid on its first call and leases its own node on its own sockets, never touching the
parent's.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from echomq.engine import ids as _ids
from echomq.engine.cancels import cancel_events, cancel_reason, cancellation
from echomq.engine.checks import MAX_RESULT_TTL, ms, text
from echomq.engine.durability import Durability, check_persistence
from echomq.engine.durability import validate as validate_durability
from echomq.engine.keys import Keyspace, slot, validate_group
from echomq.engine.options import (
    ADMISSION_WIDTH,
    DEFAULT_OPTIONS,
    Admission,
    JobOptions,
    admission,
    admission_argv,
    lane_alias,
    options_of,
    when_run_at,
)
from echomq.engine.policies import Policy, Rate, policy_args
from echomq.engine.producer import (
    Batch,
    Item,
    admission_verdict,
    lane_cap_value,
    lane_limit_value,
)
from echomq.engine.publisher import LISTENER_CHECK_INTERVAL
from echomq.engine.results import Cancellation, Verdict
from echomq.engine.scripts import ScriptRegistry
from echomq.engine.shards import ShardMap, stored_map
from echomq.engine.sync_process import SyncProcess
from echomq.engine.sync_reads import SyncReads
from echomq.engine.transitions import ADMIT_CHUNK, _admitted
from echomq.errors import (
    Closed,
    EchoMQError,
    InvalidArgument,
    NotDurable,
    QueueSharded,
    WireError,
)
from echomq.tracing import Sending, Spans, carriers_of, sending_many
from echomq.wire.blocking import ReplyError, error_of, pack
from echomq.wire.codec import Codec, JsonCodec
from echomq.wire.url import ConnectionOptions, seeds_from_url


class SyncQueue(SyncReads):
    """The producer side of one queue, blocking: ``SyncQueue.connect(url, name)``.

    ``enqueue``, ``enqueue_in``, ``enqueue_at`` and ``enqueue_many`` take what
    :class:`echomq.Queue`'s do and answer the same :class:`Verdict`; ``job``, ``state`` and
    ``wait`` read rows. Any number of threads may share one (each has its own socket), and it
    survives ``os.fork()``: the child leases its own id node on its own sockets.

    A call whose connection dropped is sent once more on a new one (admission is idempotent by
    id): a job the lost send admitted answers ``enqueued`` or ``scheduled`` when its id was
    minted here, ``duplicate`` when you passed the id.

    ``result_ttl`` (seconds) is how long a row this queue cancels is kept, as
    :class:`echomq.Queue`'s (0, the default: deleted). ``durability`` (a :class:`Durability`)
    makes each admission wait for ``WAITAOF`` on the socket that carried it, one wait per
    ``enqueue_many``, as :class:`echomq.Queue`'s does.
    """

    def __init__(
        self,
        name: str,
        seeds: Sequence[ConnectionOptions],
        *,
        codec: Codec | None = None,
        result_ttl: float = 0.0,
        durability: Durability | None = None,
        shard: tuple[ShardMap, int] | None = None,
    ) -> None:
        if not seeds:
            raise InvalidArgument("seeds", seeds, "a sync queue needs at least one server")
        #: The placement its admissions are fenced by, and which shard it is (on a shard of a
        #: sharded queue, ``ShardedSyncQueue``'s); None and 0 for a queue of one slot.
        self.placement: ShardMap | None = None
        self.shard = 0
        if shard is None:
            self.keys = Keyspace(name)
        else:
            self.placement, self.shard = shard
            self.keys = self.placement.keyspace(self.shard)
        self.name = name
        self.result_ttl_ms = ms(result_ttl, "result_ttl", most=MAX_RESULT_TTL)
        self.durability = validate_durability(durability, seeds[0].call_timeout)
        self._wait = b"" if self.durability is None else pack(self.durability.command())
        self.codec: Codec = codec or JsonCodec()
        self.seeds = list(seeds)
        self.scripts = ScriptRegistry.from_package()
        self._enqueue = self.scripts["enqueue"]
        self._lane_limit = self.scripts["lane_limit"]
        self._cancel = self.scripts["cancel"]
        self._slot = slot(self.keys.root)
        self._head = self._enqueue.head((self.keys.root, self.keys.gate))
        # One item's call: the head's words packed once, then the item's (its count cut): an
        # unfenced admission_argv([item]) is the item's own words (options.py).
        self._prefix = (
            b"*%d\r\n" % (len(self._head) + ADMISSION_WIDTH)
            + pack(self._head)[len(b"*%d\r\n" % len(self._head)) :]
        )
        self._item_cut = len(b"*%d\r\n" % ADMISSION_WIDTH)
        self._lane_head = self._lane_limit.head((self.keys.root, self.keys.gate))
        self._events = self.keys.events
        self._done = self.keys.done  # the shard channel each completion and burial is told on
        self._process = SyncProcess(self.seeds, self.scripts)
        self._closed = False
        # Lifecycle events go out as the async Queue's do: only while someone listens, asked
        # at most once a second (PUBSUB NUMSUB), fire-and-forget.
        self._has_listeners = False
        self._check_listeners_at = -math.inf
        #: Where this queue's producer spans go (OpenTelemetry, when the app set a provider).
        self.spans = Spans()

    @classmethod
    def connect(
        cls,
        url: str | ConnectionOptions,
        name: str,
        *,
        codec: Codec | None = None,
        result_ttl: float = 0.0,
        durability: Durability | None = None,
    ) -> SyncQueue:
        """Connect to ``url`` (a server, or cluster seeds ``h1:p1,h2:p2``), check the wire
        version fence (and that the server can give the ``durability`` asked), and return the
        queue; :meth:`close` gives everything back.

        On a sharded queue's name its admissions raise :class:`QueueSharded`, nothing written
        (the engine refuses them): open such a queue by name with
        ``echomq.engine.connect_sync_queue``, or with ``ShardedSyncQueue.connect``
        (docs/concepts/shards.md)."""
        Keyspace(name)  # validates before connecting
        seeds = [url] if isinstance(url, ConnectionOptions) else seeds_from_url(url)
        queue = cls(name, seeds, codec=codec, result_ttl=result_ttl, durability=durability)
        try:
            queue._start()
        except BaseException:
            queue.close()
            raise
        return queue

    def _start(self) -> None:
        """Check the wire version fence, and that the server can give the durability asked."""
        router = self._process.router
        router.start()
        if self.durability is not None:
            address = router.address(self._slot)
            info = router.call(self._slot, pack(("INFO", "persistence")))
            check_persistence(error_of(info), self.durability, address)

    def close(self) -> None:
        """Give the id node back and close every thread's socket. Idempotent."""
        if self._closed:
            return
        self._closed = True
        process = self._process
        if process.pid == os.getpid():
            process.lease.release()
            process.router.close()
        else:
            process.router.abandon()

    def __enter__(self) -> SyncQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SyncQueue({self.name!r})"

    def read_placement(self) -> ShardMap | None:
        """The map the shard directory of this queue's name holds (one round trip), None when
        it has none: a plain queue (docs/concepts/shards.md, "Lane placement")."""
        return stored_map(*self.read_directory())

    def read_directory(self) -> tuple[Any, Any]:
        """The ``HGETALL`` replies of the shard directory of this queue's name and of its
        overrides (one round trip; empty when it has none)."""
        router = self._here().router
        keys = Keyspace(self.name)  # the directory is the name's, whichever shard this is
        commands = [pack(("HGETALL", keys.directory)), pack(("HGETALL", keys.placed))]
        replies = [error_of(reply) for reply in router.call_each(slot(keys.root), commands)]
        for reply in replies:
            if isinstance(reply, EchoMQError):
                raise reply
        return replies[0], replies[1]

    def _here(self) -> SyncProcess:
        """This process's state; made anew in a forked child (the parent's is let go)."""
        process = self._process
        if self._closed:
            raise Closed("the sync queue is closed")
        if process.pid == os.getpid():
            return process
        process.router.abandon()
        fresh = SyncProcess(self.seeds, self.scripts)
        fresh.router.start()
        # Two threads of a young child may both get here: each leases a node of its own, so
        # their ids stay distinct; the loser's lease simply ends by itself.
        self._process = fresh
        return fresh

    # -- admission -----------------------------------------------------------------------------

    def admit(
        self, payload: Any, options: JobOptions = DEFAULT_OPTIONS, *, carries_context: bool = False
    ) -> Verdict:
        """Admit one job with its :class:`JobOptions`; see :meth:`Queue.admit` (its producer
        span and ``carries_context`` too)."""
        tracer = self.spans.tracer()
        if tracer is None:
            return self._admit(payload, options)
        carriers = (payload,) if carries_context else ()
        with Sending(tracer, self.name, options.lane, carriers) as sending:
            return sending.sent(self._admit(payload, options))

    def _admit(self, payload: Any, options: JobOptions, checked: bool = False) -> Verdict:
        """``checked``: on a shard, the fence says the item's dedup key and id were looked for
        on the source of its lane, held here for a move (docs/concepts/shards.md)."""
        process = self._process
        if process.pid != os.getpid() or self._closed:
            process = self._here()
        item = admission(self.codec, process.mint, payload, options)
        before = process.router.reconnects, process.router.ask
        if self.placement is None:
            command = self._prefix + pack(item)[self._item_cut :]
        else:  # a shard's: the item fenced by the placement (docs/concepts/shards.md)
            fence = self.placement.fence((item.group,))._replace(checked=checked)
            command = pack((*self._head, *admission_argv([item], fence)))
        reply = process.router.call(self._slot, command, self._enqueue)
        if type(reply) is not list:
            raise error_of(reply) if type(reply) is ReplyError else WireError(repr(reply))
        admitted = _admitted(*reply)
        if isinstance(admitted, EchoMQError):
            raise admitted
        code, job_id, state = admitted
        if self.durability is not None:
            short = self._waited(process, before, (item.id,), duplicate=code == 0)
            if short is not None:
                raise short
        if code == 0 and options.id is None and job_id == item.id:
            # An id minted here is nobody else's: this is our own send, which landed before
            # its connection dropped (the router sent it again).
            code = _landed(item)
        verdict = admission_verdict(code, job_id, state)
        if code and self._listened(process):
            self._emit(process, [{"event": verdict.kind, "job": job_id, "group": item.group}])
        return verdict

    def enqueue(
        self,
        payload: Any,
        *,
        lane: str | None = None,
        id: str | None = None,
        dedup_key: str | None = None,
        dedup_ttl: float | None = None,
        dedup_from: str = "enqueue",
        result_ttl: float | None = None,
        priority: int | None = None,
        group: str | None = None,
    ) -> Verdict:
        """Admit a job to its ``lane`` (default lane ``_``); see :meth:`Queue.enqueue`."""
        if group is not None:
            lane = lane_alias(lane, group)
        options = JobOptions(
            lane, id, dedup_key, dedup_ttl, dedup_from, None, None, result_ttl, priority=priority
        )
        return self.admit(payload, options)

    def enqueue_in(self, delay: float, payload: Any, **options: Any) -> Verdict:
        """Admit a job that becomes claimable ``delay`` seconds from now (server clock)."""
        return self.admit(payload, options_of(options, delay=delay))

    def enqueue_at(self, when: float, payload: Any, **options: Any) -> Verdict:
        """Admit a job that becomes claimable at ``when`` (Unix seconds)."""
        when_run_at(when)  # refused as ``when``, the argument's name here
        return self.admit(payload, options_of(options, at=when))

    def enqueue_many(self, items: Iterable[Item | Any]) -> list[Verdict]:
        """Admit many jobs, one script call per chunk of 100, the chunks pipelined; one verdict
        per item, in input order (see :meth:`Queue.enqueue_many`: refused items answer
        ``error``, the items of a chunk lost with the connection ``unknown``)."""
        process = self._here()
        tracer = self.spans.tracer()
        if tracer is None:
            return self._send(process, Batch.plan(items, self.codec, process.mint))
        items = carriers_of(items)
        with sending_many(tracer, self.name, items, False) as sending:
            return sending.sent_many(
                self._send(process, Batch.plan(items, self.codec, process.mint))
            )

    def admit_many(
        self, jobs: Iterable[tuple[Any, JobOptions]], *, carries_context: bool = False
    ) -> list[Verdict]:
        """:meth:`enqueue_many` for ``(payload, options)`` pairs; see :meth:`Queue.admit_many`."""
        process = self._here()
        tracer = self.spans.tracer()
        if tracer is None:
            return self._send(process, Batch.pairs(jobs, self.codec, process.mint))
        jobs = carriers_of(jobs)
        with sending_many(tracer, self.name, jobs, carries_context) as sending:
            return sending.sent_many(
                self._send(process, Batch.pairs(jobs, self.codec, process.mint))
            )

    def _send(self, process: SyncProcess, batch: Batch) -> list[Verdict]:
        admissions = batch.admissions
        if not admissions:
            return batch.verdicts
        replies = self._replies(process, admissions)
        if replies and isinstance(replies[0], QueueSharded):
            raise replies[0]  # every chunk refused whole: the queue is the wrong one, not an item
        verdicts = batch.settle(replies)
        if self._listened(process):
            self._emit(
                process,
                [
                    {"event": v.kind, "job": v.id}
                    for v in verdicts
                    if v.kind in ("enqueued", "scheduled")
                ],
            )
        return verdicts

    def _replies(self, process: SyncProcess, admissions: list[Admission]) -> list[Any]:
        """The script's reply per item (an error for the items of a chunk refused whole),
        in order; on a shard fenced by its placement."""
        (replies,) = send_admissions(process, [(self, admissions)])
        return replies

    def _calls(self, admissions: list[Admission], checked: bool = False) -> list[tuple[int, bytes]]:
        """The packed enqueue calls of ``admissions`` on this queue's slot, a chunk each
        (``checked``: as :meth:`_admit`'s)."""
        placement = self.placement
        return [
            (
                self._slot,
                pack(
                    (
                        *self._head,
                        *admission_argv(
                            chunk,
                            None
                            if placement is None
                            else placement.fence(a.group for a in chunk)._replace(checked=checked),
                        ),
                    )
                ),
            )
            for chunk in _chunks(admissions)
        ]

    @staticmethod
    def _answered(admissions: list[Admission], answers: list[Any]) -> list[Any]:
        """Each item's reply from its chunk's answer."""
        replies: list[Any] = []
        for chunk, answer in zip(_chunks(admissions), answers, strict=True):
            answer = error_of(answer)
            if isinstance(answer, EchoMQError):
                replies += [answer] * len(chunk)
            else:
                replies += [_admitted(*answer[i : i + 3]) for i in range(0, len(answer), 3)]
        return replies

    def _waited(
        self,
        process: SyncProcess,
        before: tuple[int, int],
        ids: Sequence[str],
        duplicate: bool = False,
    ) -> EchoMQError | None:
        """One ``WAITAOF`` on the thread's socket that carried the admission: None when it
        confirmed the durability's fsyncs. A socket replaced meanwhile (a reconnect) or a
        write redirected by ``ASK`` is not covered by a wait here: not confirmed. After a
        ``duplicate`` (it wrote nothing here) the durability's mark is written first, so the
        wait covers the earlier write it points at."""
        durability = self.durability
        assert durability is not None
        router = process.router
        try:
            if duplicate:
                router.call(self._slot, pack(durability.mark(self.keys.fsync)))
            reply = error_of(router.call(self._slot, self._wait))
        except WireError as exc:
            return exc
        if (router.reconnects, router.ask) != before:
            return NotDurable(
                tuple(ids), durability.asked, (0, 0), durability.timeout, "the socket changed"
            )
        return durability.shortfall([reply], ids)

    def cover(self, ids: Sequence[str]) -> EchoMQError | None:
        """A durable queue's cover of jobs ``ids`` that other connections wrote, when an answer
        points at them without writing (a duplicate found by a read): :meth:`_waited` after
        the durability's mark. None when the wait confirmed it, else the shortfall."""
        process = self._here()
        before = process.router.reconnects, process.router.ask
        return self._waited(process, before, ids, duplicate=True)

    def _listened(self, process: SyncProcess) -> bool:
        """Whether events should go out now; asks the server at most once a second."""
        now = time.monotonic()
        if now >= self._check_listeners_at:
            self._check_listeners_at = now + LISTENER_CHECK_INTERVAL
            numsub = "SHARDNUMSUB" if process.router.is_cluster else "NUMSUB"
            with contextlib.suppress(WireError):
                reply = process.router.call(self._slot, pack(("PUBSUB", numsub, self._events)))
                self._has_listeners = type(reply) is list and int(reply[1]) > 0
        return self._has_listeners

    def _emit(self, process: SyncProcess, events: list[dict[str, Any]]) -> None:
        """Publish ``events`` on the queue's event channel, fire-and-forget (at most once): one
        write after the admission's reply, their replies dropped unread with the next call's,
        so an event costs its enqueue no round trip. A publish that fails is not raised."""
        publish = "SPUBLISH" if process.router.is_cluster else "PUBLISH"
        commands = [pack((publish, self._events, _event_json(e))) for e in events]
        if commands:
            with contextlib.suppress(WireError):
                process.router.post(self._slot, b"".join(commands), len(commands))

    # -- lane settings -------------------------------------------------------------------------

    def configure_lane(
        self,
        group: str,
        *,
        limit: int | None = None,
        rate: Rate | tuple[int, float] | None = None,
        cap: int | None = None,
    ) -> None:
        """Set a lane's concurrency ceiling (``limit`` jobs leased at once), rate budget
        (``rate``: a :class:`echomq.Rate`, or ``(max, window)``: at most ``max`` claims per
        ``window`` seconds, smooth) and backlog cap (``cap`` unfinished jobs admitted, see
        ``queue.lane(group).cap()``); a setting left ``None`` is left as it is. Idempotent,
        like ``queue.lane(group).limit()``/``.rate()``/``.cap()``: the settings in force
        change nothing.
        """
        lane = validate_group(group)
        settings: list[tuple[str, str | int]] = []
        if limit is not None:
            settings.append(("glimit", lane_limit_value(limit)))
        if rate is not None:
            settings.append(("grate", Rate.of(rate).value))
        if cap is not None:
            settings.append(("gcap", lane_cap_value(cap)))
        for name, value in settings:
            self._call(pack((*self._lane_head, lane, name, value)), self._lane_limit)

    def apply_policies(
        self,
        policies: Mapping[str, Policy] | None = None,
        /,
        *,
        default: Policy | None = None,
        **lanes: Policy,
    ) -> int:
        """:meth:`echomq.Queue.apply_policies`, blocking: the default and the named lanes'
        policies in one idempotent step; the number of settings changed."""
        args = policy_args(policies, default, lanes)
        script = self.scripts["policy"]
        command = pack(script.command((self.keys.root, self.keys.gate), args))
        return int(self._call(command, script))

    def cancel(self, id: str, reason: str = "") -> Cancellation:
        """:meth:`echomq.Queue.cancel`, blocking: pending and scheduled jobs end at once, a
        running one is stopped by its worker within a beat; what happened is the answer."""
        job_id = _ids.validate(id, "JOB", "job id")
        why = cancel_reason(reason)
        head = self._cancel.head((self.keys.root, self.keys.gate))
        command = pack((*head, job_id, why, self.result_ttl_ms, ""))
        answer = cancellation(job_id, text(self._call(command, self._cancel)))
        process = self._here()
        events = cancel_events(answer, why)
        if events and self._listened(process):
            self._emit(process, events)
        return answer


_event_json = json.JSONEncoder(separators=(",", ":")).encode


def send_admissions(
    process: SyncProcess,
    parts: Sequence[tuple[SyncQueue, list[Admission]]],
    checked: bool = False,
) -> list[list[Any]]:
    """Each ``(queue, admissions)`` part's replies (:meth:`SyncQueue._replies`): the parts'
    calls in one pipeline per server (``Router.call_spread``), so the shards of a sharded
    queue that share a server cost one round trip, those on several primaries overlap theirs;
    then, with a durability, one ``WAITAOF`` per server after its writes (it covers every
    write before it on the socket, so the shards sharing a server share it), the servers'
    waits sent together too (:func:`_waited_together`). ``checked``: as
    :meth:`SyncQueue._admit`'s."""
    calls = [call for queue, admissions in parts for call in queue._calls(admissions, checked)]
    if not calls:
        return [[] for _ in parts]
    router = process.router
    before = router.reconnects, router.ask
    answers = router.call_spread(calls, parts[0][0]._enqueue)
    replies: list[list[Any]] = []
    at = 0
    for queue, admissions in parts:
        n = len(_chunks(admissions))
        replies.append(queue._answered(admissions, answers[at : at + n]))
        at += n
    if parts[0][0].durability is None:
        return replies
    shorts = _waited_together(process, before, parts, replies)
    return [  # an item written whose wait fell short may not survive a crash: unknown
        part if short is None else [r if isinstance(r, EchoMQError) else short for r in part]
        for part, short in zip(replies, shorts, strict=True)
    ]


def _waited_together(
    process: SyncProcess,
    before: tuple[int, int],
    parts: Sequence[tuple[SyncQueue, list[Admission]]],
    replies: list[list[Any]],
) -> list[EchoMQError | None]:
    """Each part's durability shortfall (None: confirmed) after one ``WAITAOF`` per server
    its parts wrote to, every server's sent before any reply is read. A server where some
    item answered ``duplicate`` gets the durability's mark first (one: any write after the
    job it points at moves the socket's offset past it; :meth:`Durability.mark`). A socket
    replaced meanwhile (a reconnect) or a write redirected by ``ASK`` is not covered."""
    durability = parts[0][0].durability
    assert durability is not None
    router = process.router
    servers: dict[str, list[int]] = {}
    for j, (queue, _) in enumerate(parts):
        servers.setdefault(router.address(queue._slot), []).append(j)
    calls: list[tuple[int, bytes]] = []
    sent: dict[str, tuple[int | None, int]] = {}  # server -> its mark's and wait's positions
    for address, members in servers.items():
        mark = None
        duplicate = next((j for j in members if _has_duplicate(replies[j])), None)
        if duplicate is not None:
            mark, marked = len(calls), parts[duplicate][0]
            calls.append((marked._slot, pack(durability.mark(marked.keys.fsync))))
        sent[address] = mark, len(calls)
        waiter = parts[members[0]][0]
        calls.append((waiter._slot, waiter._wait))
    answers = [error_of(answer) for answer in router.call_spread(calls)]
    changed = (router.reconnects, router.ask) != before
    shorts: list[EchoMQError | None] = [None] * len(parts)
    for address, members in servers.items():
        mark, wait = sent[address]
        for j in members:
            ids = tuple(a.id for a in parts[j][1])
            if mark is not None and isinstance(answers[mark], EchoMQError):
                shorts[j] = answers[mark]  # the mark did not land: nothing covers the duplicate
            elif changed:
                shorts[j] = NotDurable(
                    ids, durability.asked, (0, 0), durability.timeout, "the socket changed"
                )
            else:
                shorts[j] = durability.shortfall([answers[wait]], ids)
    return shorts


def _has_duplicate(replies: list[Any]) -> bool:
    return any(not isinstance(r, EchoMQError) and r[0] == 0 for r in replies)


def _chunks(admissions: list[Admission]) -> list[list[Admission]]:
    return [admissions[i : i + ADMIT_CHUNK] for i in range(0, len(admissions), ADMIT_CHUNK)]


def _landed(item: Admission) -> int:
    """The code our own earlier send of ``item`` got (its connection dropped before the reply):
    scheduled when its run-at lay ahead, enqueued otherwise."""
    if item.run_at < 0 or item.run_at > time.time() * 1000:
        return 2
    return 1

"""The task registry: an :class:`App` names tasks (``@app.task``) and hooks, and owns the
producer side's connections: one wire per App and one ``Queue`` per queue name (asyncio), one
``SyncQueue`` per queue name (blocking code). Eager mode runs enqueued tasks inline for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast, overload

from echomq.engine.backoff import Backoff
from echomq.engine.checks import MAX_RESULT_TTL, count, ms
from echomq.engine.durability import Durability
from echomq.engine.durability import validate as validate_durability
from echomq.engine.ids import Minter
from echomq.engine.keys import Keyspace
from echomq.engine.policies import Policy, policy_args
from echomq.engine.queue import Queue
from echomq.engine.sharded import ShardedQueue
from echomq.engine.shards import check_shards, read_map
from echomq.errors import Closed, InvalidArgument
from echomq.tasks.batch import BatchFn, Batching, BatchTask
from echomq.tasks.context import Context, TaskOutcome
from echomq.tasks.eager import EagerProducer
from echomq.tasks.handle import Handle, SyncHandle
from echomq.tasks.periodic import Schedule, register
from echomq.tasks.producer import Producer, checked_calls
from echomq.tasks.task import Call, Key, Task
from echomq.wire.codec import Codec, JsonCodec
from echomq.wire.url import seeds_from_url

if TYPE_CHECKING:
    from echomq.engine.sync_queue import SyncQueue
    from echomq.tasks.canvas import FlowHandle, TaskFlow
    from echomq.wire.pool import Wire

P = ParamSpec("P")
R = TypeVar("R")
X = TypeVar("X")
StateHook = Callable[[dict[str, Any]], Awaitable[None]]
BeforeHook = Callable[[Context], Awaitable[None]]
AfterHook = Callable[[Context, TaskOutcome], Awaitable[None]]
_H = TypeVar("_H", bound=Callable[..., Awaitable[None]])

#: Where an app connects unless told (``App(url)``, ``--url``, ``ECHOMQ_URL``).
DEFAULT_URL = "valkey://127.0.0.1:6379"
#: The options ``@app.task`` takes (a misspelt one is refused by name, not a TypeError).
TASK_OPTIONS = frozenset(
    {"queue", "lane", "retries", "backoff", "timeout", "dedup", "dedup_ttl", "dedup_from",
     "result_ttl", "debounce", "debounce_max", "debounce_keep", "lane_limit", "lane_rate",
     "batch", "priority", "cost"}
)  # fmt: skip


@dataclass(slots=True)
class Hooks:
    """The App's hooks, in registration order."""

    startup: list[StateHook] = field(default_factory=list)
    shutdown: list[StateHook] = field(default_factory=list)
    before_job: list[BeforeHook] = field(default_factory=list)
    after_job: list[AfterHook] = field(default_factory=list)


class App:
    """Tasks, hooks and the connections that enqueue them (``async with App(url) as app``)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        queue: str = "default",
        result_ttl: float = 86_400.0,
        codec: Codec | None = None,
        concurrency: int = 10,
        wire: Wire | None = None,
        minter: Minter | None = None,
        durability: Durability | None = None,
        shards: int | Mapping[str, int] | None = None,
    ) -> None:
        """``url`` is where the app connects (its sync queues too; default
        ``valkey://127.0.0.1:6379``); ``wire`` instead lends it an open connection (a process
        that already has one, tests), which ``close`` leaves open, and ``minter`` the id minter
        to share (one leased on that wire; ``close`` leaves it leased). Without them the app
        opens both itself on first use. An app on a lent wire has sync queues only when it
        is given ``url`` too (they open blocking sockets of their own). ``durability`` (a
        :class:`Durability`) is every queue's of the app, async and sync: admissions (and,
        with its ``settles``, the workers' settles) wait for ``WAITAOF``. ``shards``: the app's
        queue is a sharded one of that many shards (an int), or the named queues are (a mapping
        queue -> shards): opened by ``connect`` (docs/concepts/shards.md); a sharded queue has
        no blocking producer yet."""
        self._url_given = url is not None
        url = DEFAULT_URL if url is None else url
        seeds = seeds_from_url(url)  # a bad URL fails here, before any connection
        _check_lent(wire, minter)
        Keyspace(queue)
        #: The app's sharded queues: name -> shard count (``shards=``).
        self.shards = _sharded(queue, shards)
        ms(result_ttl, "result_ttl", most=MAX_RESULT_TTL)
        self.durability = validate_durability(durability, seeds[0].call_timeout)
        self.url = url
        self.default_queue = queue
        self.result_ttl = float(result_ttl)
        if codec is not None and not all(
            callable(getattr(codec, verb, None)) for verb in ("encode", "decode")
        ):
            raise InvalidArgument("codec", codec, "must have encode and decode (a Codec)")
        self.codec = JsonCodec() if codec is None else codec
        self.concurrency = count(concurrency, "concurrency")
        self.tasks: dict[str, Task[Any, Any]] = {}
        #: The periodic schedules (``@app.periodic``) by name; every AppWorker runs them.
        self.schedules: dict[str, Schedule] = {}
        self.hooks = Hooks()
        #: Shared by the tasks of a worker process; its startup hooks fill it.
        self.state: dict[str, Any] = {}
        #: Admits the app's calls: the live producer, or the eager one in eager mode.
        self._live = Producer(self)
        self.producer: Producer = self._live
        #: A lent wire and minter are the lender's to close; the app's own are the app's.
        self._lent = self._lent_minter = False
        self._is_closed = False  # closed since its wire was lent: another may be lent now
        self._wire: Wire | None = None
        self._opening: asyncio.Task[Wire] | None = None
        self._minter: Minter | None = None
        if wire is not None:
            self._borrow(wire, minter)
        self._queues: dict[str, Queue] = {}
        self._sync_queues: dict[str, SyncQueue] = {}
        self._sync_lock = threading.Lock()
        #: Lane policies by queue (``app.lanes``), and the queues this process applied them to.
        self._policies: dict[str, tuple[dict[str, Policy], Policy | None]] = {}
        self._applied: set[str] = set()
        self._sync_applied: set[str] = set()

    def __repr__(self) -> str:
        return f"App(queue={self.default_queue!r}, tasks={len(self.tasks)})"

    # -- registry ------------------------------------------------------------------------------

    @overload
    def task(self, name: Callable[P, Awaitable[R]], /) -> Task[P, R]: ...

    @overload
    def task(
        self,
        name: str | None = None,
        *,
        queue: str | None = None,
        lane: Key = None,
        retries: int | None = None,
        backoff: Backoff | None = None,
        timeout: float | None = None,
        dedup: Key = None,
        dedup_ttl: float | None = None,
        dedup_from: str = "enqueue",
        result_ttl: float | None = None,
        debounce: float | None = None,
        debounce_max: float | None = None,
        debounce_keep: str = "last",
        lane_limit: int | None = None,
        lane_rate: tuple[int, float] | None = None,
        priority: int | None = None,
        cost: int | None = None,
        batch: None = None,
    ) -> Callable[[Callable[P, Awaitable[R]]], Task[P, R]]: ...

    @overload
    def task(
        self,
        name: str | None = None,
        *,
        batch: Batching,
        queue: str | None = None,
        lane: Key = None,
        retries: int | None = None,
        backoff: Backoff | None = None,
        timeout: float | None = None,
        dedup: Key = None,
        dedup_ttl: float | None = None,
        dedup_from: str = "enqueue",
        result_ttl: float | None = None,
        debounce: float | None = None,
        debounce_max: float | None = None,
        debounce_keep: str = "last",
        lane_limit: int | None = None,
        lane_rate: tuple[int, float] | None = None,
        priority: int | None = None,
        cost: int | None = None,
    ) -> Callable[[BatchFn[X, R]], BatchTask[X, R]]: ...

    def task(self, name: Any = None, **options: Any) -> Any:
        """Register an ``async def`` as a task: ``@app.task`` or ``@app.task("name", ...)``.

        ``retries`` failed attempts are allowed beyond the first (None: the worker's
        ``--max-attempts``); ``timeout`` seconds per attempt; ``lane`` / ``dedup``: a parameter's
        name or a function of the arguments; ``dedup_ttl`` seconds the dedup key holds, counted
        from ``dedup_from`` (``"enqueue"``, or ``"finish"``: the job's end); ``result_ttl``
        seconds this task's results are kept (None: the app's); ``debounce`` (seconds, with
        ``debounce_max`` and ``debounce_keep``) makes the calls sharing a dedup key one job that
        runs once they pause (``JobOptions``); ``lane_limit`` / ``lane_rate`` are applied to a
        lane the first time this process enqueues on it; ``priority`` (0..9, default 5) is its
        jobs' band, more urgent first; ``cost`` (1..1000, default 1) the units each job spends of
        its lane's and queue's budgets. ``batch``: a
        :class:`Batching` makes a batch task (docs/guides/batch-tasks.md), on a queue of its own.
        """
        if callable(name):
            return self._register(name, None, {})

        def decorate(fn: Callable[P, Awaitable[R]]) -> Task[P, R]:
            return self._register(fn, name, options)

        return decorate

    def _register(
        self, fn: Callable[P, Awaitable[R]], name: str | None, options: dict[str, Any]
    ) -> Task[P, R]:
        if name is None:
            # The function's qualified name, not its module's: a producer that imports
            # `proj.tasks` and a worker started as `tasks:app` from inside `proj/` see one
            # function under two module names, and every job would meet an unknown task.
            name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "")
        if not isinstance(name, str) or not name:
            raise InvalidArgument("name", name, "a task's name is a non-empty string")
        if name in self.tasks:
            raise InvalidArgument(
                "name", name, "another task of this app has that name (give one a name=)"
            )
        unknown = sorted(options.keys() - TASK_OPTIONS)
        if unknown:
            raise InvalidArgument(unknown[0], options[unknown[0]], "is no option of app.task")
        queue = options.pop("queue", None)
        queue = self.default_queue if queue is None else queue  # "" is refused, not defaulted
        batching = options.pop("batch", None)
        task: Task[Any, Any]
        if batching is not None:
            task = BatchTask[Any, Any](
                self, cast(Any, fn), batching=batching, name=name, queue=queue, **options
            )
        else:
            task = Task(self, fn, name=name, queue=queue, **options)
        sharing = [t for t in self.tasks.values() if t.queue == queue]
        if sharing and (batching is not None or any(isinstance(t, BatchTask) for t in sharing)):
            # A worker gathers a batch task's queue whole: a job of another task there would
            # be no member of its batches.
            raise InvalidArgument(
                "queue", queue, f"a batch task has a queue of its own ({sharing[0].name} uses it)"
            )
        self.tasks[name] = task
        return cast(Task[P, R], task)

    def periodic(
        self,
        *,
        cron: str | None = None,
        every: float | None = None,
        tz: str | None = None,
        name: str | None = None,
        missed: str = "skip",
        queue: str | None = None,
        lane: str | None = None,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Callable[[Callable[P, Awaitable[R]]], Task[P, R]]:
        """Run a task on a schedule: ``cron`` (an expression, in ``tz``; the ``echomq[cron]``
        extra) or ``every`` seconds. Decorates an ``async def`` (registered as a task on
        ``queue``) or a task; ``args`` / ``kwargs`` are each occurrence's arguments, ``lane``
        the lane it rides, ``missed`` what a scheduler back from downtime does with the ticks
        it missed (``skip`` them, or enqueue ``once`` for them). ``name``: the schedule's,
        unique per app (default the task's)."""

        def decorate(fn: Callable[P, Awaitable[R]]) -> Task[P, R]:
            return register(
                self, fn, queue, cron=cron, every=every, tz=tz, name=name, missed=missed,
                lane=lane, args=args, kwargs=kwargs,
            )  # fmt: skip

        return decorate

    def queue_names(self) -> list[str]:
        """The queues this app's tasks use (the default queue when it has none)."""
        return sorted({task.queue for task in self.tasks.values()} or {self.default_queue})

    def on_startup(self, fn: _H) -> _H:
        """``async def hook(state: dict)``: run once as a worker starts, before any job."""
        self.hooks.startup.append(fn)
        return fn

    def on_shutdown(self, fn: _H) -> _H:
        """``async def hook(state: dict)``: run once as a worker stops, after its last job."""
        self.hooks.shutdown.append(fn)
        return fn

    def before_job(self, fn: _H) -> _H:
        """``async def hook(context)``: run before each attempt; raising fails the attempt."""
        self.hooks.before_job.append(fn)
        return fn

    def after_job(self, fn: _H) -> _H:
        """``async def hook(context, outcome)``: run after each attempt; raising fails it."""
        self.hooks.after_job.append(fn)
        return fn

    # -- lane policies -------------------------------------------------------------------------

    def lanes(
        self,
        policies: Mapping[str, Policy] | None = None,
        /,
        *,
        queue: str | None = None,
        default: Policy | None = None,
        **named: Policy,
    ) -> None:
        """Declare the lane policies of ``queue`` (default: the app's queue): ``default`` for
        every lane not named, and each named lane's own (by keyword, or in the ``policies``
        mapping for any lane name, ``"queue"`` included).

        Nothing is written here (call it at import time): the app applies them when it connects
        (a worker's start, a web app's lifespan) and before this process's first enqueue on the
        queue, blocking ones included. Applying is idempotent in the engine, so every process of
        a deploy applies them and no lane gets a fresh budget (``Queue.apply_policies``).
        """
        name = self.default_queue if queue is None else Keyspace(queue).queue
        policy_args(policies, default, named)  # every name and value checked now, not at connect
        lanes = {**(policies or {}), **named}
        self._policies[name] = (lanes, default)
        self._applied.discard(name)
        self._sync_applied.discard(name)

    async def _apply_lanes(self, queue: Queue) -> None:
        declared = self._policies.get(queue.name)
        if declared is not None and queue.name not in self._applied:
            await queue.apply_policies(declared[0], default=declared[1])
            self._applied.add(queue.name)

    def apply_lanes_sync(self, queue: SyncQueue) -> None:
        """The lane policies (:meth:`lanes`) applied to a blocking queue, once (a process's
        SyncQueues apply their own)."""
        declared = self._policies.get(queue.name)
        if declared is not None and queue.name not in self._sync_applied:
            queue.apply_policies(declared[0], default=declared[1])
            self._sync_applied.add(queue.name)

    # -- connections ---------------------------------------------------------------------------

    async def connect(self, *, wire: Wire | None = None, minter: Minter | None = None) -> App:
        """Open the wire (once; later calls share it). ``wire`` (and ``minter``) lend the app
        an open connection instead, as ``App(wire=...)`` does: for an app made at import time,
        before the application's pool exists (a web app's lifespan)."""
        _check_lent(wire, minter)
        if wire is not None and wire is not self._wire:
            if self._wire is not None and not self._is_closed:
                # Its queues run on the wire it has: a second one would split them.
                raise InvalidArgument("wire", wire, "the app is connected already: close it first")
            self._borrow(wire, minter)
        await self._connected()
        for name in dict.fromkeys([self.default_queue, *self.shards]):
            await self.open_queue(name)  # sharded or not, as its keys say
        for name in list(self._policies):
            await self._apply_lanes(self.queue(name))
        return self

    def _borrow(self, wire: Wire, minter: Minter | None) -> None:
        self._lent, self._lent_minter, self._is_closed = True, minter is not None, False
        self._wire = wire
        self._minter = minter if minter is not None else Minter.leased(wire)

    async def _connected(self) -> Wire:
        if self._wire is not None:
            return self._wire
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open())
        try:
            return await asyncio.shield(self._opening)
        except BaseException:
            if self._opening.done():
                self._opening = None  # a failed connect is tried again by the next call
            raise

    async def _open(self) -> Wire:
        from echomq.wire.cluster import open_wire  # the router builds on the pool: imported late

        wire: Wire = await open_wire(seeds_from_url(self.url), 1)
        self._minter = Minter.leased(wire)  # one id node for every queue of the app
        self._wire = wire
        return wire

    @property
    def wire(self) -> Wire:
        """The app's connection (to share with a dashboard, say); the app must be connected."""
        if self._wire is None:
            raise Closed("the App is not connected: use `async with app:` or `await app.connect()`")
        return self._wire

    def queue(self, name: str | None = None) -> Queue:
        """The app's ``Queue`` for ``name`` (default: the app's queue), made on first use; the
        app must be connected (``async with app`` or ``await app.connect()``)."""
        return self._queue(self.wire, self.default_queue if name is None else name)

    async def open_queue(self, name: str) -> Queue:
        """:meth:`queue`, connecting first if need be (enqueues connect on first use), with its
        lane policies (:meth:`lanes`) applied (once per process). A queue that has a shard
        directory opens as a :class:`ShardedQueue` though the app was not given ``shards=`` for
        it (one read at its first open)."""
        wire = await self._connected()
        if name not in self._queues and name not in self.shards:
            # A queue made sharded elsewhere (another app, the operator) is found by its
            # directory: one read at the first open, so no process serves its shard 0 alone.
            placement = await read_map(wire, Keyspace(name))
            if placement is not None:  # opened on the map just read, not read again by open
                self.shards[name] = placement.shards
                self._queues[name] = ShardedQueue(placement, wire, **self._queue_options())
        if name in self.shards and name not in self._queues:
            self._queues[name] = await ShardedQueue.open(
                name, wire, shards=self.shards[name], **self._queue_options()
            )
        queue = self._queue(wire, name)
        await self._apply_lanes(queue)
        return queue

    def opened_queue(self, name: str) -> Queue | None:
        """:meth:`open_queue`'s queue when it needs no await (connected, its lane policies
        applied), else None: an enqueue's fast path."""
        if self._wire is None or (name not in self._applied and name in self._policies):
            return None
        return self._queues.get(name)

    def _queue(self, wire: Wire, name: str) -> Queue:
        found = self._queues.get(name)
        if found is None:
            if name in self.shards:
                raise Closed(
                    f"the sharded queue {name!r} opens with the app: `async with app:` or "
                    "`await app.connect()` first"
                )
            found = Queue(name, wire, **self._queue_options())
            self._queues[name] = found
        return found

    def _queue_options(self) -> dict[str, Any]:
        return {
            "codec": self.codec,
            "minter": self._minter,
            "result_ttl": self.result_ttl,
            "durability": self.durability,
        }

    def sync_queue(self, name: str | None = None) -> SyncQueue:
        """The app's blocking ``SyncQueue`` for ``name``, made on first use (fork-safe); a
        ``ShardedSyncQueue`` for a queue of ``shards=``, which must exist (the app's
        ``connect`` or a worker's open makes it), and for a queue that has a shard directory
        though the app was not told of it (one read at its first use, as :meth:`open_queue`)."""
        name = self.default_queue if name is None else name
        if type(name) is not str:  # the hot path's lookup needs a str (a list is unhashable)
            Keyspace(name)
        found = self._sync_queues.get(name)  # the hot path: made already, no lock to take
        if found is not None:
            return found
        if self._lent and not self._url_given:
            raise InvalidArgument(
                "url", None, "an app on a lent wire has no sync queues unless given url= too"
            )
        from echomq.engine.opening import connect_sync_queue
        from echomq.engine.sharded_sync import ShardedSyncQueue

        with self._sync_lock:
            found = self._sync_queues.get(name)
            if found is None:
                options: dict[str, Any] = {
                    "codec": self.codec,
                    "result_ttl": self.result_ttl,
                    "durability": self.durability,
                }
                if name in self.shards:  # its directory made by the app's (or a worker's) open
                    found = ShardedSyncQueue.connect(
                        self.url, name, shards=self.shards[name], **options
                    )
                else:  # sharded or not, as its keys say: no lane written to a shard 0 unfenced
                    found = connect_sync_queue(self.url, name, **options)
                self._sync_queues[name] = found
            return found

    async def close(self) -> None:
        """Close the queues, give the id node back and close the wire; and the sync queues. A
        lent wire and minter are left open, and stay the app's (it may be used again); once
        closed, it may be lent another wire (``connect(wire=...)``)."""
        queues, self._queues = list(self._queues.values()), {}
        for queue in queues:
            await queue.close()
        if self._minter is not None and not self._lent_minter:
            await self._minter.release()  # a later enqueue leases one again
            if not self._lent:
                self._minter = None  # the next connect leases a fresh one with its wire
        if not self._lent:
            opening, self._opening = self._opening, None
            if opening is not None and not opening.done():
                # A connect still under way (a worker stopped while it started): it must not
                # finish after the close and leave its sockets open on an app closed.
                opening.cancel()
                await asyncio.gather(opening, return_exceptions=True)
            wire, self._wire = self._wire, None
            if wire is not None:
                await wire.close()
        # A lent wire stays the app's, open: it never falls back to a URL it was not given.
        self._is_closed = True
        self.close_sync()

    def close_sync(self) -> None:
        """Close the app's blocking ``SyncQueue`` sockets alone (a WSGI process, a Django task
        backend); a later blocking call opens them again. ``close`` closes them too."""
        with self._sync_lock:
            syncs, self._sync_queues = list(self._sync_queues.values()), {}
        for sync in syncs:
            sync.close()

    async def __aenter__(self) -> App:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- admission (the producer's: live, or eager in eager mode) ------------------------------

    async def enqueue_call(self, call: Call[R]) -> Handle[R]:
        """Admit one bound call (``task.enqueue`` is this with the call it binds)."""
        return await self.producer.enqueue_call(call)

    async def enqueue_many(self, calls: Iterable[Call[Any]]) -> list[Handle[Any]]:
        """Admit many calls (``task.call(...)``): one pipelined ``enqueue_many`` per queue;
        handles in input order, each with its verdict (an ``error`` one wrote nothing)."""
        return await self.producer.enqueue_many(checked_calls(calls))

    async def enqueue_flow(self, flow: TaskFlow[R]) -> FlowHandle[R]:
        """Admit a flow of tasks (:func:`echomq.chain`, :func:`echomq.group`,
        :func:`echomq.flow`), atomic per queue; the root's handle, with every node's id
        (``.ids``). Eager mode runs it inline, children first."""
        return await self.producer.enqueue_flow(flow)

    def enqueue_call_sync(self, call: Call[R]) -> SyncHandle[R]:
        """:meth:`enqueue_call` from blocking code, on the queue's ``SyncQueue``."""
        return self.producer.enqueue_call_sync(call)

    # -- eager mode ----------------------------------------------------------------------------

    @property
    def eager(self) -> bool:
        """Whether enqueued tasks run inline (eager mode), not on a worker."""
        return self.producer is not self._live

    @eager.setter
    def eager(self, on: bool) -> None:
        self.producer = EagerProducer(self) if on else self._live

    @property
    def eager_propagate(self) -> bool:
        """Whether eager mode raises a task's failure from the enqueue."""
        return bool(getattr(self.producer, "propagate", False))

    @contextlib.contextmanager
    def eager_mode(self, *, propagate: bool = False) -> Iterator[App]:
        """Within the block, enqueued tasks run inline (``propagate``: their errors raise from
        the enqueue instead of from ``result()``)."""
        saved, self.producer = self.producer, EagerProducer(self, propagate)
        try:
            yield self
        finally:
            self.producer = saved


def _check_lent(wire: Wire | None, minter: Minter | None) -> None:
    if minter is not None and not isinstance(minter, Minter):
        raise InvalidArgument("minter", minter, "expected an echomq.Minter")
    if minter is not None and wire is None:
        raise InvalidArgument("minter", minter, "give the wire it mints for too (wire=)")


def _sharded(queue: str, shards: int | Mapping[str, int] | None) -> dict[str, int]:
    """``App(shards=)`` as queue -> shard count, every name and count checked."""
    if shards is None:
        return {}
    if isinstance(shards, int):
        return {queue: check_shards(shards)}
    if not isinstance(shards, Mapping):
        raise InvalidArgument("shards", shards, "must be an int or a mapping queue -> shards")
    return {Keyspace(name).queue: check_shards(count) for name, count in shards.items()}

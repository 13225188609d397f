"""A registered task: the typed wrapper ``@app.task`` puts around an ``async def``. It binds and
checks each call, computes its lane and dedup key, and hands the admission to its app; called
directly it is still the plain function."""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, ParamSpec, TypeVar

from echomq.engine.backoff import Backoff
from echomq.engine.checks import MAX_ATTEMPTS, MAX_CEILING, MAX_RATE, MAX_RESULT_TTL, count, ms
from echomq.engine.ids import validate
from echomq.engine.keys import Keyspace
from echomq.engine.options import (
    DEFAULT_OPTIONS,
    JobOptions,
    check_cost,
    check_dedup_from,
    check_priority,
    keyed,
)
from echomq.engine.results import Verdict
from echomq.errors import InvalidArgument
from echomq.tasks.arguments import Signature

if TYPE_CHECKING:
    from echomq.tasks.app import App
    from echomq.tasks.handle import Handle, SyncHandle

P = ParamSpec("P")
_new = tuple.__new__

#: Lanes whose options a task keeps for its next calls (then it starts over).
LANES_KEPT = 1024
R = TypeVar("R")

#: A lane or dedup key: a parameter's name (its value, as text), or a function of the
#: task's arguments.
Key = str | Callable[..., Any] | None


class Call(NamedTuple, Generic[R]):
    """One bound call of a task, ready for :meth:`App.enqueue_many` (from ``task.call(...)``):
    its arguments and its :class:`JobOptions` (the task's, ``using()``'s, and the lane and dedup
    key computed from the arguments).

    A named tuple rather than a frozen dataclass: a batch makes one per item, and the tuple is
    built in a third of the time."""

    task: Task[Any, R]
    args: dict[str, Any]
    options: JobOptions = DEFAULT_OPTIONS
    #: The parameter a flow's result goes into (``task.receiving``); None for a plain call.
    receive: str | None = None

    @property
    def payload(self) -> dict[str, Any]:
        """The job's payload: ``{"task": name, "args": {parameter: value}}``."""
        return {"task": self.task.name, "args": self.args}

    @property
    def lane(self) -> str | None:
        return self.options.lane

    @property
    def id(self) -> str | None:
        return self.options.id

    @property
    def dedup_key(self) -> str | None:
        return self.options.dedup_key


class Task(Generic[P, R]):
    """An ``async def`` registered with an :class:`App`. ``await task(...)`` runs it here;
    ``await task.enqueue(...)`` runs it on a worker and returns a :class:`Handle`."""

    def __init__(
        self,
        app: App,
        fn: Callable[P, Awaitable[R]],
        *,
        name: str,
        queue: str,
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
    ) -> None:
        if not asyncio.iscoroutinefunction(fn):
            raise InvalidArgument("fn", fn, "a task must be an async function (async def)")
        Keyspace(queue)  # a bad queue name fails at decoration, not at the first enqueue
        self.app = app
        self.fn = fn
        self.name = name
        self.queue = queue
        self.signature = Signature(fn, name)
        self.lane = _key(lane, "lane", self.signature.signature)
        self.dedup = _key(dedup, "dedup", self.signature.signature)
        #: Failed attempts allowed beyond the first; None: the worker's ``max_attempts``.
        self.retries = (
            None
            if retries is None
            else count(retries, "retries", minimum=0, maximum=MAX_ATTEMPTS - 1)
        )
        if backoff is not None and not callable(getattr(backoff, "delay", None)):
            raise InvalidArgument("backoff", backoff, "must be a Backoff (Fixed, Exponential…)")
        self.backoff = backoff
        self.timeout = None if timeout is None else _seconds(timeout, "timeout")
        self.dedup_ttl = None if dedup_ttl is None else _seconds(dedup_ttl, "dedup_ttl")
        #: Where ``dedup_ttl`` counts from: ``enqueue``, or ``finish`` (the job's end).
        self.dedup_from = check_dedup_from(dedup_from, dedup_ttl)
        #: Seconds this task's completed rows (results) are kept; None: the app's result_ttl.
        self.result_ttl = None if result_ttl is None else _keep(result_ttl)
        #: The task's own admission options (its decorator's), and the ones every call starts
        #: from (the same, but a ``using()`` variant's include its options).
        self.defaults = self.options = JobOptions(
            dedup_ttl=self.dedup_ttl,
            dedup_from=self.dedup_from,
            result_ttl=self.result_ttl,
            debounce=debounce,
            debounce_max=debounce_max,
            debounce_keep=debounce_keep,
            priority=None if priority is None else check_priority(priority),
            cost=None if cost is None else check_cost(cost),
        )
        if debounce is not None or debounce_max is not None or debounce_keep != "last":
            # Checked now, not at the first enqueue (a stand-in for the call's dedup key).
            self.options._replace(dedup_key="?").check()
        #: Whether ``using()`` fixed the lane / the dedup key (else computed per call).
        self._fixed = (False, False)
        #: The lane and dedup keys each call computes (None: fixed, or none to compute).
        self._per_call = (self.lane, self.dedup)
        #: The options of the lanes calls named lately, by lane (see :meth:`call`).
        self._lanes: dict[str, JobOptions] = {}
        self.lane_limit = (
            None if lane_limit is None else count(lane_limit, "lane_limit", maximum=MAX_CEILING)
        )
        self.lane_rate = None if lane_rate is None else _rate(lane_rate)
        self.__name__ = getattr(fn, "__name__", name)
        self.__doc__ = fn.__doc__

    def __repr__(self) -> str:
        return f"Task({self.name!r}, queue={self.queue!r})"

    @property
    def max_attempts(self) -> int | None:
        return None if self.retries is None else self.retries + 1

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        """The plain function, run here (no queue, no context)."""
        return self.fn(*args, **kwargs)

    def using(
        self,
        *,
        lane: str | None = None,
        id: str | None = None,
        dedup_key: str | None = None,
        delay: float | None = None,
        at: float | None = None,
        result_ttl: float | None = None,
        debounce: float | None = None,
        debounce_max: float | None = None,
        priority: int | None = None,
        cost: int | None = None,
    ) -> Task[P, R]:
        """This task with admission options for the next enqueues: ``lane`` and ``dedup_key``
        replace the computed ones, ``id`` is the job's id, ``delay`` (seconds) or ``at`` (Unix
        seconds) schedules it, ``result_ttl`` (seconds) keeps its completed row that long,
        ``debounce`` / ``debounce_max`` (seconds) debounce it by its dedup key (``JobOptions``),
        ``priority`` (0..9) is its band, ``cost`` (1..1000) its units.
        Durations are checked here; the rest at each enqueue (a batch's item alone refused)."""
        if delay is not None and at is not None:
            raise InvalidArgument("at", at, "give delay or at, not both")
        if delay is not None:
            ms(delay, "delay")
        if result_ttl is not None:
            _keep(result_ttl)
        if priority is not None:
            check_priority(priority)
        if cost is not None:
            check_cost(cost)
        given: dict[str, Any] = {
            name: value
            for name, value in (
                ("lane", lane),
                ("id", id),
                ("dedup_key", dedup_key),
                ("result_ttl", result_ttl),
                ("debounce", debounce),
                ("debounce_max", debounce_max),
                ("priority", priority),
                ("cost", cost),
            )
            if value is not None
        }
        if delay is not None or at is not None:
            given.update(delay=delay, at=at)  # a new schedule replaces the old
        other = copy.copy(self)
        other.options = self.options._replace(**given)
        lane_fixed, dedup_fixed = self._fixed
        other._fixed = (lane_fixed or lane is not None, dedup_fixed or dedup_key is not None)
        other._per_call = (
            None if other._fixed[0] else self.lane,
            None if other._fixed[1] else self.dedup,
        )
        other._lanes = {}  # its options are its own
        return other

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call[R]:
        """The call bound and checked, for :meth:`App.enqueue_many`; nothing is sent."""
        arguments, dumped = self.signature.bound(args, kwargs)
        options = self.options
        lane, dedup = self._per_call
        if lane is not None:
            if dedup is None and type(lane) is str and type(arguments.get(lane)) is str:
                # The commonest lane, a text parameter given: one options value per lane,
                # shared by that lane's calls (immutable), instead of one made per call.
                lanes = self._lanes
                named: str = arguments[lane]
                found = lanes.get(named)
                if found is None:
                    if len(lanes) >= LANES_KEPT:
                        lanes.clear()  # many lanes (one per user, say): start over
                    found = lanes[named] = keyed(options, named, options.dedup_key)
                options = found
            else:
                options = keyed(
                    options,
                    self._key(lane, arguments),
                    options.dedup_key if dedup is None else self._key(dedup, arguments),
                )
        elif dedup is not None:
            options = keyed(options, options.lane, self._key(dedup, arguments))
        # The tuple made as NamedTuple's own __new__ makes it, less its keyword parsing.
        return _new(Call, (self, dumped, options, None))

    def receiving(self, *args: Any, **kwargs: Any) -> Call[R]:
        """A call whose first parameter receives a flow's result when it runs (a link of
        :func:`echomq.chain`, the callback of :func:`echomq.group`); the other parameters are
        bound here, and checked, as :meth:`call` does. Lane and dedup functions are not run
        (they would need the result): a ``using(lane=...)`` lane is kept."""
        receive, arguments = self.signature.bind_receiving(args, kwargs)
        options = self.options
        if not self._fixed[0] and isinstance(self.lane, str) and self.lane != receive:
            options = keyed(options, self._key(self.lane, arguments), options.dedup_key)
        return Call(self, self.signature.dump(arguments), options, receive)

    def _key(self, key: Key, arguments: dict[str, Any]) -> str | None:
        if key is None:
            return None
        if isinstance(key, str):
            value = arguments[key] if key in arguments else self.signature.defaults.get(key)
        else:
            value = self.signature.call_with(key, arguments)
        return None if value is None else str(value)

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Handle[R]:
        """Admit a job that runs this task on a worker; bad arguments raise before any write."""
        return await self.app.enqueue_call(self.call(*args, **kwargs))

    def handle(self, id: str) -> Handle[R]:
        """A handle on a job of this task enqueued earlier (say, by another process)."""
        from echomq.tasks.handle import Handle

        verdict = Verdict("unknown", validate(id, "JOB", "job id"))
        return Handle(self, verdict, None if self.app.eager else self.app.queue(self.queue))

    def handle_sync(self, id: str) -> SyncHandle[R]:
        """:meth:`handle` for blocking code (a Django view reading a job's status by id)."""
        from echomq.tasks.handle import SyncHandle

        verdict = Verdict("unknown", validate(id, "JOB", "job id"))
        return SyncHandle(
            self, verdict, None if self.app.eager else self.app.sync_queue(self.queue)
        )

    def enqueue_sync(self, *args: P.args, **kwargs: P.kwargs) -> SyncHandle[R]:
        """:meth:`enqueue` from blocking code (a thread, a WSGI view), on a blocking socket."""
        return self.app.enqueue_call_sync(self.call(*args, **kwargs))


def _key(key: Key, argument: str, signature: inspect.Signature) -> Key:
    if key is None or callable(key):
        return key
    if not isinstance(key, str) or key not in signature.parameters:
        raise InvalidArgument(argument, key, "must name a parameter of the task, or be callable")
    return key


def _seconds(value: float, argument: str) -> float:
    ms(value, argument, positive=True)
    return float(value)


def _keep(value: float) -> float:
    ms(value, "result_ttl", most=MAX_RESULT_TTL)
    return float(value)


def _rate(rate: tuple[int, float]) -> tuple[int, float]:
    if not isinstance(rate, tuple) or len(rate) != 2:
        raise InvalidArgument("lane_rate", rate, "must be (max jobs, window seconds)")
    most, window = rate
    count(most, "lane_rate", maximum=MAX_RATE)
    return most, _seconds(window, "lane_rate")


def as_args(refusal: InvalidArgument, call: Call[Any]) -> InvalidArgument:
    """A refusal of a call's payload (the codec's: not JSON, too deep, too big) as the task's
    user wrote it: its ``args``; any other refusal as it is."""
    if refusal.argument != "payload":
        return refusal
    return InvalidArgument("args", refusal.value, f"{call.task.name}: {refusal.reason}")

"""Batch tasks, the declaration side: :class:`Batching` (how a batch is shaped), :class:`Member`
(one job of a batch, as its handler sees it), :class:`MemberVerdict` (what became of it) and
:class:`BatchTask`, a task whose members are enqueued one by one and run together. The worker
side: :mod:`echomq.consumers.batch` gathers batches, :mod:`echomq.tasks.batch_runner` runs and
settles them."""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from echomq.engine.checks import count, ms
from echomq.engine.keys import DEFAULT_GROUP
from echomq.engine.results import Job
from echomq.errors import InvalidArgument
from echomq.tasks.context import LOCAL_IDS
from echomq.tasks.task import Task

if TYPE_CHECKING:
    from echomq.tasks.app import App

X = TypeVar("X")
R = TypeVar("R")
V = TypeVar("V")

#: The most members one batch may hold.
MAX_BATCH_SIZE = 10_000
#: The longest a batch may wait for its minimum size (its members' leases are extended while
#: it waits, but a longer wait is a schedule, not a batch).
MAX_BATCH_WAIT = 300.0
#: The most batches one worker runs at once per batch task.
MAX_BATCHES = 1_000


@dataclass(frozen=True, slots=True)
class Batching:
    """How a batch task's batches are shaped. A worker claims up to ``max_size`` members on one
    lease; with fewer than ``min_size`` (default: ``max_size``) it waits up to ``max_wait``
    seconds for more, parked on the queue's wake list, then runs with what it has.
    ``concurrency``: batches one worker runs at once (the next one gathers meanwhile).
    ``by_lane``: every batch holds one lane's jobs (one tenant per bulk insert or API call):
    the lane whose turn it is gives up to ``max_size``, in one claim, and the batch runs with
    that (no gathering across claims: the next claim may be another lane's)."""

    max_size: int
    max_wait: float
    min_size: int | None = None
    concurrency: int = 1
    by_lane: bool = False

    def __post_init__(self) -> None:
        count(self.max_size, "max_size", maximum=MAX_BATCH_SIZE)
        ms(self.max_wait, "max_wait", positive=True, most=MAX_BATCH_WAIT)
        if self.min_size is not None:
            count(self.min_size, "min_size", maximum=self.max_size)
        count(self.concurrency, "concurrency", maximum=MAX_BATCHES)
        if type(self.by_lane) is not bool:
            raise InvalidArgument("by_lane", self.by_lane, "must be True or False")

    @property
    def least(self) -> int:
        """The size at which a batch leaves without waiting."""
        return self.max_size if self.min_size is None else self.min_size


Kind = Literal["done", "retry", "dead"]


@dataclass(frozen=True, slots=True)
class MemberVerdict(Generic[R]):
    """What became of one member: ``done`` (its ``result`` kept like any task's), ``retry``
    (after ``delay`` seconds, or the task's backoff when None; dead at its last attempt, as any
    retry) or ``dead`` (dead-lettered now with ``reason``). Made by :class:`Member`'s methods."""

    id: str
    kind: Kind
    result: R | None = None
    delay: float | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Member(Generic[X]):
    """One job of a batch: its ``id`` (a key for idempotent writes), its ``item`` (the value
    given to ``enqueue``, rebuilt from the annotation), its ``lane`` and its ``attempts``."""

    id: str
    item: X
    lane: str = DEFAULT_GROUP
    attempts: int = 1
    job: Job | None = field(default=None, repr=False, compare=False)

    def done(self, result: V | None = None) -> MemberVerdict[V]:
        """This member succeeded; ``result`` is what its handle's ``result()`` returns."""
        return MemberVerdict(self.id, "done", result)

    def retry(
        self, delay: float | None = None, reason: str = "retry requested"
    ) -> MemberVerdict[Any]:
        """Run this member again (in a later batch) after ``delay`` seconds; None: the task's
        backoff. Counts as an attempt: at the task's last attempt the member is dead."""
        if delay is not None:
            ms(delay, "delay")
        return MemberVerdict(self.id, "retry", None, delay, _reason(reason))

    def dead(self, reason: str) -> MemberVerdict[Any]:
        """Dead-letter this member now (no retry mends it), with ``reason`` as its error."""
        return MemberVerdict(self.id, "dead", None, None, _reason(reason))


def _reason(reason: object) -> str:
    if not isinstance(reason, str) or not reason:
        raise InvalidArgument("reason", reason, "must be a non-empty str")
    return reason


#: A batch handler: the members in, a verdict per member out (None: every member done).
BatchFn = Callable[[list[Member[X]]], Awaitable[Sequence[MemberVerdict[R]] | None]]


class BatchTask(Task[[X], R]):
    """A task that runs its jobs in batches: ``await task.enqueue(item)`` admits one member
    (a job with its own id, lane, dedup and handle); a worker hands the handler a list of
    :class:`Member` and settles each by its verdict. ``batching`` says how batches form."""

    def __init__(
        self,
        app: App,
        fn: BatchFn[X, R],
        *,
        batching: Batching,
        name: str,
        queue: str,
        **options: Any,
    ) -> None:
        if not isinstance(batching, Batching):
            raise InvalidArgument("batch", batching, "must be a Batching(max_size=, max_wait=)")
        if not asyncio.iscoroutinefunction(fn):
            raise InvalidArgument("fn", fn, "a batch task must be an async function (async def)")
        item, result = _hints(fn)
        self.batching = batching
        self.batch_fn = fn

        async def one(item: X) -> R:
            """A batch of one (eager mode; or the task called directly)."""
            return await self._run_one(item)

        # The members' signature: one parameter, ``item``, annotated as the handler's members
        # are (so enqueue binds and checks it, and the worker rebuilds it).
        one.__annotations__ = {"item": item, "return": result}
        one.__qualname__ = one.__name__ = getattr(fn, "__name__", name)
        super().__init__(app, one, name=name, queue=queue, **options)
        self.__doc__ = fn.__doc__

    def __repr__(self) -> str:
        return f"BatchTask({self.name!r}, queue={self.queue!r})"

    async def _run_one(self, item: X) -> R:
        from echomq.tasks.context import current

        ctx = current()
        if ctx is None:
            member = Member(LOCAL_IDS.mint("JOB"), item)
        else:
            job = ctx.job
            member = Member(job.id, item, job.lane, job.attempts, job)
        verdicts = await self.batch_fn([member])
        if verdicts is None:
            return None  # type: ignore[return-value]
        if len(verdicts) != 1 or not isinstance(verdicts[0], MemberVerdict):
            raise BatchFailed(f"returned {_size(verdicts)} verdicts for 1 member")
        verdict = verdicts[0]
        if verdict.kind != "done":
            raise BatchFailed(f"{verdict.kind}: {verdict.reason}")
        return typing.cast(R, verdict.result)


class BatchFailed(Exception):
    """A batch of one that did not end ``done`` (eager mode): its verdict as the error."""


def _size(verdicts: object) -> str:
    return str(len(verdicts)) if isinstance(verdicts, Sequence) else "no list of"


def _hints(fn: Callable[..., Any]) -> tuple[Any, Any]:
    """The member type ``X`` of ``list[Member[X]]`` and the result type ``R`` of
    ``Sequence[MemberVerdict[R]] | None`` in the handler's annotations (``Any`` when absent)."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an annotation that cannot be resolved: values travel as JSON gives them
        hints = {}
    params = list(inspect.signature(fn).parameters)
    if len(params) != 1:
        raise InvalidArgument("fn", fn, "a batch task takes one parameter: its members' list")
    item = _inner(hints.get(params[0]), Member)
    result = _inner(hints.get("return"), MemberVerdict)
    return item, result


def _inner(hint: Any, wrapper: type) -> Any:
    """``T`` of ``wrapper[T]`` found inside ``hint`` (through lists, sequences and unions)."""
    if typing.get_origin(hint) is wrapper:
        args = typing.get_args(hint)
        return args[0] if args else Any
    for arg in typing.get_args(hint):
        found = _inner(arg, wrapper)
        if found is not Any:
            return found
    return Any

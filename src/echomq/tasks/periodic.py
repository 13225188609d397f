"""Periodic tasks: the schedules ``@app.periodic`` declares (a cron expression in a time zone,
or a fixed interval), checked at declaration, their tick arithmetic and each occurrence's
derived id. The loop that enqueues them is the scheduler's (scheduler.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from echomq._extras import missing
from echomq.engine.checks import ms
from echomq.engine.ids import EPOCH_MS, NODE_SHIFT, TS_SHIFT, encode
from echomq.engine.keys import validate_group
from echomq.errors import InvalidArgument, shown
from echomq.tasks.task import Call, Task

if TYPE_CHECKING:
    from echomq.tasks.app import App

Missed = Literal["skip", "once"]
#: The hash bits of an occurrence id: its 10-bit node and 12-bit seq fields, less the seq's top
#: bit, which is always set. A leased minter reaches a seq of 2048 only past its 2048th id in
#: one ms, so a minted id meets an occurrence id only in such a burst, on that node, at the tick.
_SEQ_TOP = 1 << (NODE_SHIFT - 1)
HASH_BITS = (1 << TS_SHIFT) - 1 - _SEQ_TOP
_NAME = re.compile(r"[A-Za-z0-9._:@-]+")
#: An ``every=`` schedule ticks at least a second apart, at most a year.
MIN_EVERY, MAX_EVERY = 1.0, 366 * 86_400.0
#: A tick's dedup key lives at least a day, and at least two periods: longer than any
#: scheduler can still attempt that tick (it attempts only the latest tick at or before now).
MIN_DEDUP_TTL = 86_400.0


def name_hash(name: str) -> int:
    """The schedule name's stable hash in the node and seq bits of an id (the same in every
    process and release: BLAKE2b, not Python's salted ``hash``)."""
    digest = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big")
    return (digest & HASH_BITS) | _SEQ_TOP


def occurrence_id(name: str, tick_ms: int) -> str:
    """The id of schedule ``name``'s occurrence at ``tick_ms`` (Unix ms): a ``JOB`` id whose
    timestamp is the tick, so occurrence ids are mint-ordered by tick."""
    return encode("JOB", (tick_ms - EPOCH_MS) << TS_SHIFT | name_hash(name))


def missed_tick(
    missed: Missed, due: int | None, last: int | None, planned: int | None
) -> int | None:
    """The tick to enqueue for missed ticks, found at a scheduler's start (``planned`` None) or
    after it overslept a whole period: ``due`` is the latest tick at or before now, ``last`` the
    last one enqueued (None: the schedule never ran, so nothing was missed). ``skip`` enqueues
    none; ``once`` the latest missed tick."""
    floor = last if last is not None else (None if planned is None else planned - 1)
    if missed == "once" and due is not None and floor is not None and due > floor:
        return due
    return None


@dataclass(frozen=True, slots=True)
class Schedule:
    """One periodic schedule of a task: every ``every`` seconds (ticks at multiples of it since
    the Unix epoch) or at each match of ``cron`` in ``tz``; each tick enqueues ``call`` (on
    its lane: ``lane``, else the task's lane of the arguments)."""

    name: str
    call: Call[Any]
    lane: str | None
    missed: Missed
    every: float | None = None
    cron: str | None = None
    tz: str = "UTC"
    #: Seconds each tick's dedup key lives: a day, or two of the longest gaps between ticks.
    dedup_ttl: float = MIN_DEDUP_TTL

    @property
    def task(self) -> Task[Any, Any]:
        return self.call.task

    @property
    def queue(self) -> str:
        return self.call.task.queue

    def after(self, unix_ms: int) -> int:
        """The first tick strictly after ``unix_ms`` (Unix ms)."""
        if self.every is not None:
            step = round(self.every * 1000)
            return (unix_ms // step + 1) * step
        assert self.cron is not None
        from cronsim import CronSim

        start = datetime.fromtimestamp(unix_ms // 1000, ZoneInfo(self.tz))
        return int(next(CronSim(self.cron, start)).timestamp()) * 1000

    def at_or_before(self, unix_ms: int) -> int | None:
        """The latest tick at or before ``unix_ms``, or None (no tick in cron's 50-year reach)."""
        if self.every is not None:
            step = round(self.every * 1000)
            return unix_ms // step * step
        assert self.cron is not None
        from cronsim import CronSim

        # Cron ticks are whole seconds: the latest before the next second is at or before now.
        start = datetime.fromtimestamp(unix_ms // 1000 + 1, ZoneInfo(self.tz))
        found = next(CronSim(self.cron, start, reverse=True), None)
        return None if found is None else int(found.timestamp()) * 1000

    def id_at(self, tick_ms: int) -> str:
        """The id of this schedule's occurrence at ``tick_ms`` (for ``task.handle``)."""
        return occurrence_id(self.name, tick_ms)

    def dedup_key(self, tick_ms: int) -> str:
        """The tick's dedup key: the guard for a tick whose row is gone (``result_ttl=0``)."""
        return f"periodic:{self.name}:{tick_ms}"


def declare(
    task: Task[Any, Any],
    *,
    cron: str | None,
    every: float | None,
    tz: str | None,
    name: str | None,
    missed: str,
    lane: str | None,
    args: tuple[Any, ...] | list[Any],
    kwargs: dict[str, Any] | None,
) -> Schedule:
    """A schedule checked argument by argument (nothing of it is kept on a refusal)."""
    if (cron is None) == (every is None):
        raise InvalidArgument("cron", cron, "give cron= (an expression) or every= (seconds)")
    if missed not in ("skip", "once"):
        raise InvalidArgument("missed", missed, "must be 'skip' or 'once'")
    if name is None:
        # The task's name, made a legal key ("f.<locals>.beat" -> "f._locals_.beat").
        name = re.sub(r"[^A-Za-z0-9._:@-]", "_", task.name)[-200:]
    if not isinstance(name, str) or not 1 <= len(name) <= 200 or not _NAME.fullmatch(name):
        # It goes into each tick's dedup key, whose characters these are.
        raise InvalidArgument(
            "name", name, "a schedule's name is 1 to 200 of A-Z a-z 0-9 . _ : @ - (give name=)"
        )
    if lane is not None:
        validate_group(lane)
    if not isinstance(args, tuple | list):
        raise InvalidArgument("args", shown(args, 80), "must be a tuple of positional arguments")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise InvalidArgument("kwargs", kwargs, "must be a dict of keyword arguments")
    for key in kwargs or ():
        if not isinstance(key, str):
            raise InvalidArgument("kwargs", key, "a keyword argument's name must be a str")
    call = task.call(*args, **(kwargs or {}))  # a missing argument is refused here, as "args"
    if lane is not None:
        # The task's lane_limit / lane_rate go to this lane.
        call = call._replace(options=call.options._replace(lane=lane))
    policy = cast(Missed, missed)
    if every is not None:
        if tz is not None:
            raise InvalidArgument("tz", tz, "a time zone applies to cron= schedules only")
        ms(every, "every", positive=True, most=MAX_EVERY)
        if every < MIN_EVERY or round(every * 1000) != every * 1000:
            raise InvalidArgument("every", every, "must be at least 1 s, in whole ms")
        ttl = max(MIN_DEDUP_TTL, 2.0 * every)
        return Schedule(name, call, lane, policy, every=float(every), dedup_ttl=ttl)
    zone = "UTC" if tz is None else _zone(tz)
    schedule = Schedule(name, call, lane, policy, cron=_cron(cron), tz=zone)
    try:
        first = schedule.after(EPOCH_MS)
    except StopIteration:
        raise InvalidArgument("cron", cron, "never matches") from None
    gaps, tick = [], first
    for _ in range(3):
        following = schedule.after(tick)
        gaps.append(following - tick)
        tick = following
    return dataclasses.replace(schedule, dedup_ttl=max(MIN_DEDUP_TTL, max(gaps) / 500))


def _zone(tz: object) -> str:
    if not isinstance(tz, str) or not tz:
        raise InvalidArgument("tz", tz, "must be an IANA time zone name, like 'Europe/Paris'")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidArgument("tz", tz, "is not a known IANA time zone") from None
    return tz


def _cron(expression: object) -> str:
    try:
        from cronsim import CronSim, CronSimError
    except ImportError:
        raise InvalidArgument("cron", expression, missing("cron", "a cron schedule")) from None
    if not isinstance(expression, str):
        raise InvalidArgument("cron", expression, "must be a cron expression (str)")
    try:
        CronSim(expression, datetime.fromtimestamp(0, ZoneInfo("UTC")))
    except CronSimError as exc:
        raise InvalidArgument("cron", expression, f"is not a cron expression: {exc}") from None
    return expression


def register(
    app: App, fn: Callable[..., Awaitable[Any]], queue: str | None, **options: Any
) -> Task[Any, Any]:
    """``@app.periodic``'s work: the task (``fn`` itself, or ``fn`` registered on ``queue``)
    and its schedule, both or neither."""
    if isinstance(fn, Task):
        if fn.app is not app:
            raise InvalidArgument("task", fn, "is a task of another app")
        if queue is not None and queue != fn.queue:
            raise InvalidArgument("queue", queue, f"the task's queue is {fn.queue!r}")
        task = fn
    else:
        task = app.task(queue=queue)(fn)
    try:
        schedule = declare(task, **options)
        if schedule.name in app.schedules:
            raise InvalidArgument(
                "name", schedule.name, "another schedule of this app has that name"
            )
    except BaseException:
        if task is not fn:
            del app.tasks[task.name]  # a refused declaration registers nothing, whatever refused
        raise
    app.schedules[schedule.name] = schedule
    return task

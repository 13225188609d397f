"""The producer's pure pieces, shared by the async ``Queue`` and the blocking ``SyncQueue``.

A batch's plan (which items go out, which are refused in place) and its verdicts, the lane
settings as the engine stores them, and a job row as :class:`JobInfo`. A job's options and their
checks are :mod:`echomq.engine.options`'. No I/O: both wires call these.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from echomq.engine.checks import MAX_CAP, MAX_CEILING, count
from echomq.engine.checks import text as _text
from echomq.engine.options import (
    DEFAULT_OPTIONS,
    Admission,
    JobOptions,
    admission,
    lane_alias,
)
from echomq.engine.policies import DEFAULT_MODE, rate_value
from echomq.engine.results import JobInfo, JobState, Verdict, VerdictKind
from echomq.engine.transitions import Admitted
from echomq.errors import (
    EchoMQError,
    InvalidArgument,
    LaneFull,
    LaneMoved,
    NotDurable,
    WireError,
    renamed,
)
from echomq.wire.codec import Codec

#: An admission's reply code as its verdict (see enqueue.lua).
VERDICTS: Mapping[int, VerdictKind] = {
    0: "duplicate",
    1: "enqueued",
    2: "scheduled",
    3: "debounced",
}
#: The states a row may hold; anything else reads as ``absent``.
STATES = frozenset({"pending", "active", "scheduled", "dead", "completed", "cancelled", "waiting"})
_UNSENT = Verdict("error", "")  # a placeholder until the wire answers


@dataclass(frozen=True, slots=True, init=False)
class Item:
    """One job for ``enqueue_many``: its payload and the options ``enqueue`` takes, with
    ``delay`` (seconds from now) to schedule it; :attr:`options` is them as :class:`JobOptions`
    (``admit_many`` takes ``(payload, options)`` pairs directly). ``group=`` is the deprecated
    name of ``lane=``. Frozen: ``dataclasses.replace(item, id=verdict.id)`` resends one."""

    payload: Any
    lane: str | None = None
    id: str | None = None
    dedup_key: str | None = None
    delay: float | None = None
    dedup_ttl: float | None = None
    dedup_from: str = "enqueue"
    result_ttl: float | None = None
    priority: int | None = None
    cost: int | None = None

    def __init__(
        self,
        payload: Any,
        lane: str | None = None,
        id: str | None = None,
        dedup_key: str | None = None,
        delay: float | None = None,
        dedup_ttl: float | None = None,
        dedup_from: str = "enqueue",
        result_ttl: float | None = None,
        *,
        priority: int | None = None,
        cost: int | None = None,
        group: str | None = None,
    ) -> None:
        if group is not None:
            lane = lane_alias(lane, group)
        setattr = object.__setattr__  # frozen: set once, here
        setattr(self, "payload", payload)
        setattr(self, "lane", lane)
        setattr(self, "id", id)
        setattr(self, "dedup_key", dedup_key)
        setattr(self, "delay", delay)
        setattr(self, "dedup_ttl", dedup_ttl)
        setattr(self, "dedup_from", dedup_from)
        setattr(self, "result_ttl", result_ttl)
        setattr(self, "priority", priority)
        setattr(self, "cost", cost)

    @property
    def group(self) -> str | None:
        """Deprecated: :attr:`lane`, the same value."""
        renamed("Item.group", "Item.lane")
        return self.lane

    @property
    def options(self) -> JobOptions:
        return JobOptions(
            self.lane,
            self.id,
            self.dedup_key,
            self.dedup_ttl,
            self.dedup_from,
            self.delay,
            None,
            self.result_ttl,
            priority=self.priority,
            cost=self.cost,
        )


@dataclass(slots=True)
class Batch:
    """An ``enqueue_many`` in flight: one verdict slot per item, in input order; the items that
    passed their checks go out as ``admissions``, the others hold their ``error`` already."""

    verdicts: list[Verdict] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)  # where each admission's verdict goes
    admissions: list[Admission] = field(default_factory=list)

    @classmethod
    def plan(cls, items: Iterable[Item | Any], codec: Codec, mint: Callable[[], str]) -> Batch:
        batch = cls()
        add = batch.add
        for item in items:
            if type(item) is Item:
                add(codec, mint, item.payload, item.options)
            else:
                add(codec, mint, item, DEFAULT_OPTIONS)
        return batch

    @classmethod
    def pairs(
        cls, jobs: Iterable[tuple[Any, JobOptions]], codec: Codec, mint: Callable[[], str]
    ) -> Batch:
        """The plan of ``(payload, options)`` pairs (``admit_many``)."""
        batch = cls()
        add = batch.add
        for job in jobs:
            if type(job) is not tuple or len(job) != 2 or not isinstance(job[1], JobOptions):
                raise InvalidArgument("jobs", job, "expected (payload, JobOptions) pairs")
            add(codec, mint, job[0], job[1])
        return batch

    def add(self, codec: Codec, mint: Callable[[], str], payload: Any, options: JobOptions) -> None:
        """One more job, checked as :func:`admission` checks it: refused, it holds its
        ``error`` verdict in place and is not sent."""
        try:
            admitted = admission(codec, mint, payload, options)
        except InvalidArgument as exc:
            self.verdicts.append(Verdict("error", str(options.id or ""), exc))
            return
        self.positions.append(len(self.verdicts))
        self.admissions.append(admitted)
        self.verdicts.append(_UNSENT)

    def settle(self, replies: Sequence[Admitted]) -> list[Verdict]:
        """Put each admission's reply in its place; the verdicts in input order."""
        verdicts = self.verdicts
        for position, admitted, reply in zip(self.positions, self.admissions, replies, strict=True):
            verdicts[position] = verdict(reply, admitted.id)
        return verdicts


def verdict(reply: Admitted, job_id: str) -> Verdict:
    """One item's reply as its verdict: a lost connection is ``unknown``, a full lane or a
    lane the shard does not serve (:class:`LaneMoved`) ``rejected``, another refusal ``error``;
    a write its durability's ``WAITAOF`` did not confirm is ``unknown`` too (send it again)."""
    if isinstance(reply, WireError | NotDurable):
        return Verdict("unknown", job_id, reply)
    if isinstance(reply, LaneFull | LaneMoved):
        return Verdict("rejected", job_id, reply)
    if isinstance(reply, EchoMQError):
        return Verdict("error", job_id, reply)
    return admission_verdict(*reply)


def admission_verdict(code: int, job_id: str, state: str = "") -> Verdict:
    """An admission's reply ``(code, id, state)`` (see enqueue.lua) as its verdict; a
    duplicate's carries the state its job was found in."""
    kind = VERDICTS[code]
    return Verdict(kind, job_id, state=job_state(state.encode()) if kind == "duplicate" else None)


# -- lane settings -----------------------------------------------------------------------------


def lane_limit_value(ceiling: int | None) -> str | int:
    """A lane's concurrency ceiling as ``glimit`` stores it ("" clears it)."""
    return "" if ceiling is None else count(ceiling, "ceiling", maximum=MAX_CEILING)


def lane_cap_value(cap: int | None) -> str | int:
    """A lane's backlog cap as ``gcap`` stores it ("" clears it)."""
    return "" if cap is None else count(cap, "cap", maximum=MAX_CAP)


def lane_rate_value(max: int | None, window: float | None, mode: str = DEFAULT_MODE) -> str:
    """A lane's rate budget (``max`` claims per ``window`` seconds, counted as ``mode`` says)
    as ``grate`` stores it ("" clears it)."""
    return "" if max is None else rate_value(max, window, mode)


# -- job rows ----------------------------------------------------------------------------------


def job_info(id: str, row: Mapping[bytes, bytes], codec: Codec) -> JobInfo | None:
    """A job's row (``HGETALL``) as :class:`JobInfo`; None for an empty row (no such job)."""
    if not row:
        return None
    fields = {_text(k): v for k, v in row.items()}
    return JobInfo(
        id=id,
        state=job_state(fields["state"]),
        attempts=int(fields["attempts"]),
        payload=codec.decode(fields["payload"]),
        lane=_text(fields.get("group", b"_")),
        last_error=_text(fields["last_error"]) if "last_error" in fields else None,
        stalled=int(fields.get("stalled", 0)),
        progress=json.loads(fields["progress"]) if "progress" in fields else None,
        result=codec.decode(fields["result"]) if "result" in fields else None,
        finished=int(fields["finished"]) / 1000 if "finished" in fields else None,
        traceback=_text(fields["traceback"]) if "traceback" in fields else None,
        cancel=_text(fields["cancel"]) if "cancel" in fields else None,
        failures=max(0, int(fields["attempts"]) - int(fields.get("grace", 0))),
    )


def job_state(raw: bytes | None) -> JobState:
    """A row's ``state`` field (None: no row) as a :data:`JobState`."""
    name = _text(raw) if raw is not None else "absent"
    return name if name in STATES else "absent"  # type: ignore[return-value]

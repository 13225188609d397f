"""The producer's pure pieces, shared by the async ``Queue`` and the blocking ``SyncQueue``.

The checks that turn one enqueue's arguments into the engine's :class:`Admission`, a batch's
plan (which items go out, which are refused in place) and its verdicts, the lane settings as the
engine stores them, and a job row as :class:`JobInfo`. No I/O: both wires call these.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from echomq.engine import ids as _ids
from echomq.engine.checks import (
    MAX_CAP,
    MAX_CEILING,
    MAX_DURATION,
    MAX_PAYLOAD,
    MAX_RESULT_TTL,
    MAX_UNIX_SECONDS,
    count,
    ms,
)
from echomq.engine.checks import text as _text
from echomq.engine.keys import DEFAULT_GROUP, validate_dedup, validate_group
from echomq.engine.policies import DEFAULT_MODE, rate_value
from echomq.engine.results import JobInfo, JobState, Verdict, VerdictKind
from echomq.engine.transitions import Admission, Admitted
from echomq.errors import EchoMQError, InvalidArgument, LaneFull, NotDurable, WireError
from echomq.wire.codec import Codec

#: An admission's reply code as its verdict (see enqueue.lua).
VERDICTS: Mapping[int, VerdictKind] = {0: "duplicate", 1: "enqueued", 2: "scheduled"}
#: The states a row may hold; anything else reads as ``absent``.
STATES = frozenset({"pending", "active", "scheduled", "dead", "completed", "cancelled", "waiting"})
_UNSENT = Verdict("error", "")  # a placeholder until the wire answers
_OPTIONS = frozenset({"group", "id", "dedup_key", "dedup_ttl", "dedup_from", "result_ttl"})
#: Where a dedup key's TTL counts from: the enqueue, or the job's end (completed, dead,
#: cancelled or removed), the key living as long as the job until then.
DEDUP_FROM = ("enqueue", "finish")


@dataclass(frozen=True, slots=True)
class Item:
    """One job for ``enqueue_many``. ``delay`` (seconds) schedules it for later; ``dedup_ttl``
    (seconds) bounds how long its ``dedup_key`` holds, counted from ``dedup_from``, and
    ``result_ttl`` (seconds) keeps its completed row, as in ``enqueue``."""

    payload: Any
    group: str | None = None
    id: str | None = None
    dedup_key: str | None = None
    delay: float | None = None
    dedup_ttl: float | None = None
    dedup_from: str = "enqueue"
    result_ttl: float | None = None


def admission(
    codec: Codec,
    mint: Callable[[], str],
    payload: Any,
    group: str | None,
    id: str | None,
    dedup_key: str | None,
    dedup_ttl: float | None,
    run_at: int,
    dedup_from: str | None = None,
    result_ttl: float | None = None,
) -> Admission:
    """One job as the engine takes it, every argument checked (``InvalidArgument`` names the
    one refused, before anything is minted or sent). ``mint`` makes the id when ``id`` is None."""
    data = codec.encode(payload)
    if len(data) > MAX_PAYLOAD:
        raise InvalidArgument(
            "payload", f"<{len(data)} bytes>", f"encodes to more than {MAX_PAYLOAD} bytes"
        )
    lane = DEFAULT_GROUP if group is None else validate_group(group)
    dedup = "" if dedup_key is None else validate_dedup(dedup_key)
    ttl = 0 if dedup_ttl is None else ms(dedup_ttl, "dedup_ttl", positive=True)
    start = check_dedup_from(dedup_from, dedup_ttl)
    keep = -1 if result_ttl is None else ms(result_ttl, "result_ttl", most=MAX_RESULT_TTL)
    job_id = mint() if id is None else _ids.validate(id, "JOB", "job id")
    return Admission(job_id, data, lane, run_at, dedup, ttl, start, keep)


def check_dedup_from(dedup_from: str | None, dedup_ttl: float | None) -> str:
    """``dedup_from`` checked (None: ``enqueue``); counting from the finish needs a TTL."""
    if dedup_from is None:
        return "enqueue"
    if dedup_from not in DEDUP_FROM:
        raise InvalidArgument("dedup_from", dedup_from, "must be 'enqueue' or 'finish'")
    if dedup_from == "finish" and dedup_ttl is None:
        raise InvalidArgument(
            "dedup_ttl", dedup_ttl, "dedup_from='finish' needs a dedup_ttl (seconds after the end)"
        )
    return dedup_from


def delay_run_at(delay: float) -> int:
    """``enqueue_in``'s seconds from now as the engine's ``run_at`` (negative: relative ms)."""
    return -ms(delay, "delay")


def when_run_at(when: float, argument: str = "when") -> int:
    """An epoch timestamp in Unix seconds (``enqueue_at``'s ``when``, ``task.using(at=)``) as
    engine ms. A value above 10**11 is a millisecond timestamp by mistake (BullMQ and JavaScript
    count in ms): refused, naming ``argument``, as is anything more than 10 years ahead."""
    if isinstance(when, int | float) and not isinstance(when, bool) and when > MAX_UNIX_SECONDS:
        raise InvalidArgument(
            argument, when, "looks like milliseconds: it takes Unix seconds (time.time())"
        )
    return ms(when, argument, positive=True, most=time.time() + MAX_DURATION)


def admission_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``enqueue_in`` / ``enqueue_at``'s keyword options, each named (unknown ones refused)."""
    unknown = set(options) - _OPTIONS
    if unknown:
        raise InvalidArgument(
            "option", sorted(unknown)[0], f"allowed: {', '.join(sorted(_OPTIONS))}"
        )
    return {name: options.get(name) for name in _OPTIONS}


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
        for item in items:
            if not isinstance(item, Item):
                item = Item(item)
            try:
                run_at = 0 if item.delay is None else delay_run_at(item.delay)
            except InvalidArgument as exc:
                batch.verdicts.append(Verdict("error", str(item.id or ""), exc))
                continue
            batch.add(
                codec,
                mint,
                item.payload,
                item.group,
                item.id,
                item.dedup_key,
                item.dedup_ttl,
                run_at,
                item.dedup_from,
                item.result_ttl,
            )
        return batch

    def add(
        self,
        codec: Codec,
        mint: Callable[[], str],
        payload: Any,
        group: str | None,
        id: str | None,
        dedup_key: str | None,
        dedup_ttl: float | None,
        run_at: int,
        dedup_from: str | None = None,
        result_ttl: float | None = None,
    ) -> None:
        """One more job, checked as :func:`admission` checks it: refused, it holds its
        ``error`` verdict in place and is not sent."""
        try:
            admitted = admission(
                codec,
                mint,
                payload,
                group,
                id,
                dedup_key,
                dedup_ttl,
                run_at,
                dedup_from,
                result_ttl,
            )
        except InvalidArgument as exc:
            self.verdicts.append(Verdict("error", str(id or ""), exc))
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
    """One item's reply as its verdict: a lost connection is ``unknown``, a full lane
    ``rejected``, another refusal ``error``; a write its durability's ``WAITAOF`` did not
    confirm is ``unknown`` too (send it again)."""
    if isinstance(reply, WireError | NotDurable):
        return Verdict("unknown", job_id, reply)
    if isinstance(reply, LaneFull):
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
        group=_text(fields.get("group", b"_")),
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

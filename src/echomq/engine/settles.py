"""The settle verbs of a :class:`echomq.Queue`: complete (with a result, kept while the queue's
``result_ttl`` lasts), retry (with a traceback), delay, cool, extend, and wait for a job to
finish.

Each is a call of one fenced Lua transition; the queue mixes them in (``Queue(Settles)``).
Durations are seconds; every argument is checked before any wire traffic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar

from echomq.engine import ids as _ids
from echomq.engine.checks import (
    MAX_ATTEMPTS,
    MAX_LEASE,
    MAX_PAYLOAD,
    MAX_TOKEN,
    count,
    error_text,
    ms,
    traceback_text,
)
from echomq.engine.keys import validate_group
from echomq.engine.lanes import cool_end
from echomq.engine.results import (
    Completed,
    CompleteOutcome,
    Failed,
    Job,
    JobInfo,
    RetryOutcome,
)
from echomq.engine.transitions import Engine, Failure, SettleCode, Success
from echomq.engine.waiters import WaiterHub
from echomq.errors import (
    EchoMQError,
    InvalidArgument,
    NotDurable,
    StaleTokenError,
    StateError,
    WireError,
)
from echomq.wire.codec import Codec

#: 3: completed, and its flow parent on another queue waits for this queue's relay.
_COMPLETED: dict[int, CompleteOutcome] = {
    1: "completed",
    3: "completed",
    0: "gone",
    -1: "stale",
    -2: "settled",
}
#: complete.lua's code for a completion that appended to the queue's flow outbox.
_RELAY_DUE = 3
_RETRIED: dict[int, RetryOutcome] = {
    1: "scheduled",
    2: "dead",
    3: "cancelled",
    0: "gone",
    -1: "stale",
    -2: "settled",
}
_O = TypeVar("_O", CompleteOutcome, RetryOutcome)


class Settles:
    """Settling leased jobs, and waiting for jobs to finish (mixed into :class:`Queue`)."""

    engine: Engine
    codec: Codec
    #: ms a completed job's row is kept (0: deleted at completion), as complete.lua takes it.
    result_ttl_ms: int
    #: A completion appended to the flow outbox since the last upkeep: a consumer runs its
    #: upkeep (which relays) at once rather than at its next due time.
    relay_due: bool = False
    #: ``None`` as the codec last encoded it (most handlers return nothing): encoded once.
    _none_data: tuple[Codec, bytes] | None = None
    _waiters: WaiterHub
    _listened: Callable[[], bool]
    _emit: Callable[[Iterable[dict[str, Any]]], None]

    async def complete(
        self, job: Job | str, token: int | None = None, *, result: Any = None
    ) -> bool:
        """Settle a success. False when the job is already gone.

        With ``result_ttl`` 0 the row is deleted (a job enqueued with a ``result_ttl`` of its own
        is kept for that instead); else it is kept that long as ``completed``,
        with ``result`` (encoded with the queue's codec, at most 16 MiB) for :meth:`job` and
        :meth:`wait`. Raises :class:`StaleTokenError` when another claim holds the job now, and
        :class:`StateError` when this claim settled it already.
        """
        job_id, token = _ref(job, token)
        (code,) = await self.engine.complete(
            [Success(job_id, token, self.encode_result(result))], self.result_ttl_ms
        )
        if isinstance(code, EchoMQError):
            raise code
        if code == _RELAY_DUE:
            self.relay_due = True
        outcome = _COMPLETED[code]
        if outcome == "completed" and self._listened():
            self._emit([{"event": "completed", "job": job_id}])
        return _raised(outcome, "complete", job_id) == "completed"

    async def complete_each(self, jobs: Iterable[Job | Completed]) -> list[CompleteOutcome]:
        """Complete many leased jobs (a :class:`Completed` carries its result), one script call
        per chunk of 100, each job fenced by its own token; one outcome per job, in order,
        nothing raised for a job (a result that cannot be encoded is refused, before any
        write, with :class:`InvalidArgument`).

        ``completed``; ``gone`` (no such job); ``stale`` (another claim holds it now);
        ``settled`` (this claim settled it already); ``unknown`` (the connection dropped with
        the job in flight: it may or may not be completed; its lease decides, nothing is lost).
        """
        none = self.encode_result(None)  # a bare Job's result
        successes = [
            Success(*_ref(item.job, None), self.encode_result(item.result))
            if isinstance(item, Completed)
            else Success(*_ref(item, None), none)
            for item in jobs
        ]
        return await self.complete_encoded(successes)

    async def complete_encoded(self, successes: list[Success]) -> list[CompleteOutcome]:
        """:meth:`complete_each` of jobs whose results are encoded already (the settler's)."""
        if not successes:
            return []
        codes = await self.engine.complete(successes, self.result_ttl_ms)
        if _RELAY_DUE in codes:
            self.relay_due = True
        outcomes = [_outcome(code, _COMPLETED) for code in codes]
        if self._listened():
            self._emit(
                {"event": "completed", "job": success.id}
                for success, outcome in zip(successes, outcomes, strict=True)
                if outcome == "completed"
            )
        return outcomes

    def encode_result(self, result: Any) -> bytes:
        """``result`` as complete.lua takes it: the codec's bytes, kept on the row when the queue
        keeps results and handed to a flow's parent. When the queue keeps none, a result the
        codec refuses (or too large) is sent as b"": it fails no attempt, and a parent reads it
        as None (docs/guides/flows.md)."""
        if result is None:
            known = self._none_data
            if known is None or known[0] is not self.codec:
                known = self._none_data = (self.codec, self._encoded(None))
            return known[1]
        return self._encoded(result)

    def _encoded(self, result: Any) -> bytes:
        try:
            data = self.codec.encode(result)
        except InvalidArgument as exc:
            if not self.result_ttl_ms:
                return b""
            raise InvalidArgument("result", exc.value, exc.reason) from None
        if len(data) > MAX_PAYLOAD and not self.result_ttl_ms:
            return b""
        if len(data) > MAX_PAYLOAD:
            raise InvalidArgument(
                "result", f"<{len(data)} bytes>", f"encodes to more than {MAX_PAYLOAD} bytes"
            )
        return data

    async def complete_many(self, jobs: Iterable[Job | Completed]) -> list[bool]:
        """:meth:`complete_each` as booleans: True completed, False gone. A stale token raises
        :class:`StaleTokenError` (and a lost connection its error) after every other job in
        the batch was settled."""
        batch = list(jobs)
        outcomes = await self.complete_each(batch)
        for item, outcome in zip(batch, outcomes, strict=True):
            job = item.job if isinstance(item, Completed) else item
            if outcome == "unknown":
                raise WireError(
                    f"the connection dropped (or the durability's wait fell short) while "
                    f"completing {job.id}"
                )
            _raised(outcome, "complete", job.id)
        return [outcome == "completed" for outcome in outcomes]

    async def wait(self, id: str, timeout: float | None = None) -> JobInfo | None:
        """The job's row once it is ``completed`` or ``dead``; None when ``timeout`` seconds
        pass first, and None at once when no such row exists (never admitted, or completed
        on a queue that keeps no results, or its kept result expired).

        Event-driven, never polling: every wait of the queue shares one sharded subscription
        to the queue's ``done`` channel, on a connection of its own (opened at the first wait,
        re-subscribed after a lost socket; the row is read again then, so nothing is missed).
        """
        job_id = _ids.validate(id, "JOB", "job id")
        if timeout is not None:
            ms(timeout, "timeout")
        return await self._waiters.wait(job_id, timeout)

    async def retry(
        self,
        job: Job | str,
        token: int | None = None,
        *,
        delay: float = 0.0,
        max_attempts: int = 3,
        error: str = "",
        traceback: str | None = None,
    ) -> Literal["scheduled", "dead", "cancelled", "gone"]:
        """Settle a failure: schedule the next attempt after ``delay``, or dead-letter the job
        once it failed ``max_attempts`` times (delays do not count as failures). ``error`` is
        kept as ``last_error``, ``traceback`` (its last 8 KiB) as ``traceback``. A job a cancel
        marked while it ran is not retried: it ends ``cancelled``."""
        job_id, token = _ref(job, token)
        failure = error_text(error)
        attempts = count(max_attempts, "max_attempts", maximum=MAX_ATTEMPTS)
        (code,) = await self.engine.retry(
            [
                Failure(
                    job_id, token, ms(delay, "delay"), attempts, failure, traceback_text(traceback)
                )
            ]
        )
        if isinstance(code, EchoMQError):
            raise code
        outcome = _raised(_RETRIED[code], "retry", job_id)
        self._emit_retried([(job_id, outcome, failure)])
        return outcome  # type: ignore[return-value]

    async def retry_each(self, failures: Iterable[Failed]) -> list[RetryOutcome]:
        """Settle many failures, one script call per chunk of 100, each job fenced by its own
        token; one outcome per job, in order, nothing raised for a job: ``scheduled``,
        ``dead``, ``cancelled`` (a cancel marked it while it ran), ``gone``, ``stale``,
        ``settled`` or ``unknown`` (see :meth:`complete_each`).
        """
        batch: list[Failure] = []
        for failed in failures:
            job_id, token = _ref(failed.job, None)
            attempts = count(failed.max_attempts, "max_attempts", maximum=MAX_ATTEMPTS)
            delay = ms(failed.delay, "delay")
            batch.append(
                Failure(
                    job_id,
                    token,
                    delay,
                    attempts,
                    error_text(failed.error),
                    traceback_text(failed.traceback),
                )
            )
        if not batch:
            return []
        outcomes = [_outcome(code, _RETRIED) for code in await self.engine.retry(batch)]
        self._emit_retried(
            [(f.id, outcome, f.error) for f, outcome in zip(batch, outcomes, strict=True)]
        )
        return outcomes

    def _emit_retried(self, settled: list[tuple[str, str, str]]) -> None:
        if self._listened():
            self._emit(
                {"event": "cancelled", "job": job_id}
                if outcome == "cancelled"
                else {
                    "event": "retrying" if outcome == "scheduled" else "dead",
                    "job": job_id,
                    "error": error[:200],
                }
                for job_id, outcome, error in settled
                if outcome in ("scheduled", "dead", "cancelled")
            )

    async def delay(self, job: Job | str, token: int | None = None, *, delay: float) -> bool:
        """Re-schedule a leased job ``delay`` seconds from now without counting a failure.
        False when the job is gone; True when settled (a job a cancel marked while it ran
        ends ``cancelled`` instead)."""
        job_id, token = _ref(job, token)
        code = await self.engine.delay(job_id, token, ms(delay, "delay", positive=True))
        if code and self._listened():
            self._emit([{"event": "delayed" if code == 1 else "cancelled", "job": job_id}])
        return code != 0

    async def cool(
        self,
        job: Job | str,
        token: int | None = None,
        *,
        after: float | None = None,
        until: float | None = None,
        lane: str = "_",
    ) -> bool:
        """Put a leased job back in its lane without counting an attempt, and cool that whole
        lane for ``after`` seconds (or until the Unix time ``until``), in one atomic step fenced
        by the token: what a handler's ``Cool`` does. Every worker skips the lane until then;
        it rejoins the ring by itself. False when the job is gone (the lane cools anyway; a job
        given by id names its lane by ``lane``); True when settled (a job a cancel marked
        while it ran ends ``cancelled`` instead)."""
        at, mode = cool_end(after, until, "after")
        job_id, token = _ref(job, token)
        group = job.lane if isinstance(job, Job) else validate_group(lane)
        _, code, ends = await self.engine.cool_lane(group, at, mode, (job_id, token))
        if code and self._listened():
            # The job's own lane (the row's) is the one cooled: the one the event names.
            if code == 1:
                event = {"event": "cooling", "job": job_id, "group": group, "until": ends / 1000}
            else:
                event = {"event": "cancelled", "job": job_id}
            self._emit([event])
        return code != 0

    async def extend(self, job: Job | str, token: int | None = None, *, lease: float) -> bool:
        """Push a lease to now + ``lease``. False when the job is gone or no longer leased."""
        job_id, token = _ref(job, token)
        lease_ms = ms(lease, "lease", positive=True, most=MAX_LEASE)
        (code,) = await self.engine.extend(lease_ms, [(job_id, token)])
        if code == -1:
            raise StaleTokenError(f"EMQSTALE extend token mismatch for {job_id}")
        return code == 1

    async def extend_many(
        self, jobs: Iterable[Job | tuple[str, int]], *, lease: float
    ) -> list[str]:
        """Extend many leases on one server TIME; returns the ids that could not be extended."""
        pairs = [
            _ref(job[0], job[1]) if isinstance(job, tuple) else _ref(job, None) for job in jobs
        ]
        if not pairs:
            return []
        codes = await self.engine.extend(ms(lease, "lease", positive=True, most=MAX_LEASE), pairs)
        return [job_id for (job_id, _), code in zip(pairs, codes, strict=True) if code != 1]


def _outcome(code: SettleCode, table: Mapping[int, _O]) -> _O | Literal["unknown"]:
    """A settle code as its outcome; a wire error in its place is ``unknown``, and so is a
    settle its durability's ``WAITAOF`` did not confirm (its lease decides, as for a drop)."""
    if isinstance(code, WireError | NotDurable):
        return "unknown"
    if isinstance(code, EchoMQError):
        raise code  # not the connection: a server refusal of the whole call
    return table[code]


def _raised(outcome: str, verb: str, job_id: str) -> str:
    """A single settle's refusals as errors: another claim holds the job, or this one settled."""
    if outcome == "stale":
        raise StaleTokenError(f"EMQSTALE {verb} token mismatch for {job_id}")
    if outcome == "settled":
        raise StateError(f"EMQSTATE {verb} refused: this claim settled the job already ({job_id})")
    return outcome


def _ref(job: Job | str, token: int | None) -> tuple[str, int]:
    if isinstance(job, Job):
        return job.id, job.attempts if token is None else token
    if token is None:
        raise InvalidArgument("token", token, "settling by id needs the token the claim returned")
    if isinstance(token, bool) or not isinstance(token, int) or not 1 <= token <= MAX_TOKEN:
        raise InvalidArgument("token", token, "must be the positive attempts value of the claim")
    return _ids.validate(job, "JOB", "job id"), token

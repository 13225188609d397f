"""The values echomq calls return: jobs, verdicts, and the normal outcomes that are not errors.

Durations are seconds (``float``); ``*_ms`` fields are the engine's raw server-clock integers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from echomq.errors import EchoMQError, renamed

VerdictKind = Literal[
    "enqueued", "scheduled", "duplicate", "debounced", "rejected", "error", "unknown"
]
JobState = Literal[
    "pending", "active", "scheduled", "completed", "dead", "cancelled", "waiting", "absent"
]
#: The states a job ends in: what ``Queue.wait`` (and a handle's ``result``) waits for.
FINISHED: frozenset[JobState] = frozenset({"completed", "dead", "cancelled"})
#: One job's answer to :meth:`Queue.complete_each`.
CompleteOutcome = Literal["completed", "gone", "stale", "settled", "unknown"]
#: One job's answer to :meth:`Queue.retry_each`.
RetryOutcome = Literal["scheduled", "dead", "cancelled", "gone", "stale", "settled", "unknown"]
#: What :meth:`Queue.cancel` did, by the state the job was in (:attr:`Cancellation.was`).
CancelOutcome = Literal["cancelled", "requested", "finished", "absent"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to one enqueue: ``enqueued``, ``scheduled``, ``duplicate``, ``rejected``,
    ``error`` or ``unknown``.

    ``id`` is the job that holds the work: for a duplicate, the job that was there first, and
    ``state`` what that job was doing when this enqueue found it (``pending``, ``scheduled``,
    ``active``, ``waiting``, ``completed``, ``dead``, ``cancelled``, or ``absent``: its dedup
    key outlived its row), read in the same script call; None for every other kind.
    ``rejected`` (batches only: a single enqueue raises :class:`~echomq.LaneFull`) means the
    item's lane was full, nothing written: ``reason`` is ``"lane full"`` and ``error`` the
    :class:`~echomq.LaneFull` with the lane, its cap and its backlog; ``id`` is the id the item
    would have had (send it again later with that id). On a shard of a sharded queue an item of
    a lane the shard does not serve is ``rejected`` too, nothing written: ``reason`` is
    ``"lane moved"`` and ``error`` the :class:`~echomq.errors.LaneMoved` naming the shard that
    serves it (send it there with that id). ``error`` means refused, nothing
    written (``error`` says why). ``unknown`` (batches only) means the connection dropped with
    the item in flight: it may or may not have been admitted, and sending it again with the
    same ``id`` is safe (admission is idempotent by id).
    """

    kind: VerdictKind
    id: str
    error: EchoMQError | None = None
    state: JobState | None = None

    @property
    def reason(self) -> str | None:
        """Why a ``rejected`` item was refused (``"lane full"`` or ``"lane moved"``); None for
        other kinds."""
        if self.kind != "rejected":
            return None
        return getattr(self.error, "reason", None)

    @property
    def ok(self) -> bool:
        """True when the work is admitted: a duplicate is a success shape; ``rejected``,
        ``error`` and ``unknown`` are not."""
        return self.kind not in ("rejected", "error", "unknown")


@dataclass(frozen=True, slots=True)
class Job:
    """A leased job. ``attempts`` is its fencing token: pass it back to settle the job."""

    id: str
    payload: Any
    attempts: int
    lane: str
    deadline_ms: int
    queue: str = field(default="", repr=False)
    #: The shard that leased it, on a sharded queue (0 on a queue of one slot): its settles go
    #: there.
    shard: int = field(default=0, repr=False)

    @property
    def group(self) -> str:
        """Deprecated: :attr:`lane`, the same value."""
        renamed("Job.group", "Job.lane")
        return self.lane


@dataclass(frozen=True, slots=True)
class Completed:
    """One succeeded job for :meth:`Queue.complete_each`: ``result`` is kept on its row (encoded
    with the queue's codec) when the queue keeps results (``result_ttl`` > 0)."""

    job: Job
    result: Any = None


@dataclass(frozen=True, slots=True)
class Failed:
    """One failed attempt for :meth:`Queue.retry_each`: retry ``job`` after ``delay`` seconds,
    or dead-letter it once it failed ``max_attempts`` times; ``error`` is kept as
    ``last_error``, and ``traceback`` (the formatted one, its last 8 KiB) as ``traceback``."""

    job: Job
    error: str = ""
    delay: float = 0.0
    max_attempts: int = 3
    traceback: str | None = None


@dataclass(frozen=True, slots=True)
class Cancellation:
    """The answer to :meth:`Queue.cancel`: ``was`` is the state the job was in.

    ``pending``, ``scheduled`` or ``waiting`` (a flow parent; its children run on): it is
    ``cancelled`` now. ``active``: its holder was told and
    stops the handler within a beat (the row ends ``cancelled`` then; a handler that finished
    first completes). ``completed``, ``dead`` or ``cancelled``: it had finished, nothing
    changed. ``absent``: no such job. Normal outcomes all: nothing here is an error.
    """

    id: str
    was: JobState

    @property
    def outcome(self) -> CancelOutcome:
        if self.was in ("pending", "scheduled", "waiting"):
            return "cancelled"
        if self.was == "active":
            return "requested"
        return "absent" if self.was == "absent" else "finished"


@dataclass(frozen=True, slots=True)
class Empty:
    """Nothing is claimable now. ``retry_in`` (seconds): a rate-limited lane returns then."""

    retry_in: float | None = None

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class RateLimited:
    """The queue's rate window is spent; claims succeed again after ``wait`` seconds."""

    wait: float

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job's row as stored: state, token, payload and the optional fields.

    ``result`` (decoded with the queue's codec) is a completed job's, kept while the queue's
    ``result_ttl`` lasts; ``finished`` is when it completed or went dead (Unix seconds, server
    clock); ``traceback`` is the latest failed attempt's; ``cancel`` is the reason a cancel gave
    (a ``cancelled`` job's, or a running job's that was asked to stop). ``progress`` is the
    latest value its holder reported (:meth:`Queue.progress`, ``context().progress``),
    decoded from its JSON: a number, a str, a list or a dict; None when none was reported.
    ``failures`` is how many attempts failed so far: ``attempts`` (the claims, the fencing
    token) less the grace that deferrals and reprocessing gave back, the count the engine's
    ``max_attempts`` rule reads (for an active job it includes the attempt in hand)."""

    id: str
    state: JobState
    attempts: int
    payload: Any
    lane: str
    last_error: str | None = None
    stalled: int = 0
    progress: Any = None
    result: Any = None
    finished: float | None = None
    traceback: str | None = None
    cancel: str | None = None
    failures: int = 0

    @property
    def group(self) -> str:
        """Deprecated: :attr:`lane`, the same value."""
        renamed("JobInfo.group", "JobInfo.lane")
        return self.lane


@dataclass(frozen=True, slots=True)
class Counts:
    """Jobs per state, the terminal counters, and how many lanes exist / are on the ring."""

    pending: int
    active: int
    scheduled: int
    dead: int
    completed: int
    failed: int
    lanes: int
    ringed: int
    #: Jobs cancelled (a counter, like ``completed`` and ``failed``).
    cancelled: int = 0
    #: Flow parents waiting for their children (in no lane until the last one settles).
    waiting: int = 0


@dataclass(frozen=True, slots=True)
class LaneInfo:
    """One lane's state: the settings in force (its own, else the queue's default policy).
    ``limit`` 0 = no ceiling; ``rate`` None = unlimited; ``cap`` 0 = no backlog cap, else the
    unfinished jobs (``depth`` + ``active`` + ``scheduled``) admission lets the lane hold;
    ``scheduled`` its jobs waiting in the schedule (delayed, retrying or deferred)."""

    lane: str
    depth: int
    active: int
    limit: int
    weight: int
    rate: tuple[int, float] | None
    paused: bool
    rate_wait: float
    rate_mode: str | None = None  # "smooth" or "fixed" when ``rate`` is set
    cap: int = 0
    scheduled: int = 0
    #: The Unix time (server clock, seconds) the lane cools until; None: not cooling.
    cooling_until: float | None = None
    #: Seconds the lane still cools (0: not cooling), as ``rate_wait`` for its rate.
    cooling: float = 0.0

    @property
    def backlog(self) -> int:
        """The lane's unfinished jobs, as its cap counts them: pending, leased and scheduled."""
        return self.depth + self.active + self.scheduled

    @property
    def group(self) -> str:
        """Deprecated: :attr:`lane`, the same value."""
        renamed("LaneInfo.group", "LaneInfo.lane")
        return self.lane


@dataclass(frozen=True, slots=True)
class Reaped:
    """What one reap did: leases returned to their lanes, and jobs dead after too many stalls."""

    recovered: list[str]
    dead: list[str]


@dataclass(frozen=True, slots=True)
class Upkeep:
    """One beat's upkeep: scheduled jobs moved, benched lanes returned, and what reap did."""

    moved: int
    lanes: int
    reaped: Reaped
    #: Seconds until the next scheduled job, lease deadline or benched lane falls due (None:
    #: nothing is waiting on time), so an idle consumer skips upkeep that could find nothing.
    next_due: float | None = None

    @property
    def found_work(self) -> bool:
        return bool(self.moved or self.lanes or self.reaped.recovered)

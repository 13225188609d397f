"""The pure model the queue state machine holds the engine against: jobs and their states, the
lanes and what makes one serviceable, priority bands, and the fairness bound a waiting lane is
owed within its band."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

# "_" is the default lane: the machine enqueues into it without naming a group.
GROUPS = ("_", "a", "b", "c")
#: A job's priority when none is given: the default band (its lane scores it 0).
DEFAULT_PRIORITY = 5


def text_of(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# -- the model -----------------------------------------------------------------------------------


@dataclass
class Row:
    """A live job as the model sees it (completed jobs have no row)."""

    lane: str
    payload: int
    state: str = "pending"  # pending | active | scheduled | dead
    attempts: int = 0
    stalled: int = 0
    last_error: str | None = None
    # The token of the lease a reap took back: its holder may still settle until the next claim.
    reaped: int | None = None
    # The reason of a cancel that marked it while leased: it is not run again (cancel.lua).
    cancel: str | None = None
    # Attempts given back (a Cool put it back unrun): failures = attempts - grace.
    grace: int = 0
    # Its band: a lane serves its jobs by priority (higher first), then mint order.
    priority: int = DEFAULT_PRIORITY
    # Its units: what it takes of its lane's ceiling while leased (the row's `cost`, when not 1).
    cost: int = 1

    @property
    def failures(self) -> int:
        return self.attempts - self.grace


@dataclass
class Lease:
    lane: str
    token: int
    deadline_ms: int
    is_short: bool


@dataclass
class Model:
    """The queue in plain Python: lanes in mint order, settings, leases, and the terminal sets."""

    rows: dict[str, Row] = field(default_factory=dict)
    lanes: dict[str, list[str]] = field(default_factory=lambda: {g: [] for g in GROUPS})
    paused: set[str] = field(default_factory=set)
    # Lanes cooling (lane.cool, a handler's Cool) for longer than any example lasts.
    cooling: set[str] = field(default_factory=set)
    limits: dict[str, int] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    # The default lane policy: the ceiling and weight of every lane without its own.
    default_limit: int | None = None
    default_weight: int | None = None
    concurrency: int | None = None
    # Backlog caps: each lane's own, and the default policy's for every lane without one.
    caps: dict[str, int] = field(default_factory=dict)
    default_cap: int | None = None
    is_queue_paused: bool = False
    active: dict[str, Lease] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)
    completed: set[str] = field(default_factory=set)
    # The token each completed job was completed with (its kept row, when the queue keeps them,
    # answers a later settle "settled" for that token, "stale" for others).
    completed_tokens: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    # Jobs that ended cancelled, the attempts each had then (a kept row is fenced like a
    # completed one), and how many were cancelled.
    cancelled: set[str] = field(default_factory=set)
    cancelled_tokens: dict[str, int] = field(default_factory=dict)
    cancel_count: int = 0
    # Every (id, token) a claim ever handed out, so settles can replay old tokens.
    tokens: list[tuple[str, int]] = field(default_factory=list)
    # In flight when a ceiling was lowered below that: the ceiling may be exceeded until they
    # settle (a ceiling gates claims; it never evicts leases).
    limit_slack: dict[str, int] = field(default_factory=dict)
    concurrency_slack: int = 0
    # A job outside the default band was admitted (meta `banded`: the claim walks bands).
    is_banded: bool = False
    # A job of another cost than 1 was admitted (meta `costed`: the claim reads costs), and
    # the dearest cost admitted (meta `costed` holds it: fairness by cost's default quantum).
    is_costed: bool = False
    costmax: int = 1
    # Fairness by work (Queue.fairness): None (by count) or "cost", and the quantum set.
    fair: str | None = None
    quantum: int | None = None

    def order(self, job_id: str) -> tuple[int, str]:
        """A job's place in its lane: its band's score (more urgent first), then its id."""
        return DEFAULT_PRIORITY - self.rows[job_id].priority, job_id

    def band(self, group: str) -> int:
        """The band of the lane's head job: the ring the lane sits on while serviceable."""
        return self.rows[self.lanes[group][0]].priority

    def rings(self) -> dict[int, set[str]]:
        """The serviceable lanes by the band of their head job."""
        rings: dict[int, set[str]] = {}
        for group in self.serviceable():
            rings.setdefault(self.band(group), set()).add(group)
        return rings

    def gactive(self, group: str) -> int:
        return sum(1 for lease in self.active.values() if lease.lane == group)

    def units(self, group: str) -> int:
        """The lane's units in flight: the costs of its leased jobs (its ceiling counts them)."""
        return sum(self.rows[i].cost for i, lease in self.active.items() if lease.lane == group)

    def head_fits(self, group: str, units: int | None = None) -> bool:
        """Whether the lane's head fits its ceiling beside ``units`` in flight (default: the
        lane's now): under it by the head's cost, or alone (nothing in flight)."""
        ceiling, units = self.ceiling(group), self.units(group) if units is None else units
        if ceiling is None or not self.lanes[group]:
            return True
        return units < ceiling and (
            units == 0 or units + self.rows[self.lanes[group][0]].cost <= ceiling
        )

    def scheduled(self, group: str) -> int:
        return sum(
            1 for row in self.rows.values() if row.lane == group and row.state == "scheduled"
        )

    def backlog(self, group: str) -> int:
        """The lane's unfinished jobs, as its cap counts them: pending, leased and scheduled."""
        return len(self.lanes[group]) + self.gactive(group) + self.scheduled(group)

    def cap(self, group: str) -> int | None:
        """The lane's backlog cap in force: its own, else the default policy's (None: none)."""
        return self.caps.get(group, self.default_cap)

    def is_full(self, group: str) -> bool:
        """Admission refuses a new job of the lane (LaneFull, a ``rejected`` item)."""
        cap = self.cap(group)
        return cap is not None and self.backlog(group) >= cap

    def weight(self, group: str) -> int:
        return self.weights.get(group, self.default_weight or 1)

    def ceiling(self, group: str) -> int | None:
        """The lane's ceiling in force: its own, else the default policy's (None: none)."""
        return self.limits.get(group, self.default_limit)

    def is_serviceable(self, group: str) -> bool:
        ceiling = self.ceiling(group)
        return (
            bool(self.lanes[group])
            and group not in self.paused
            and group not in self.cooling
            and (ceiling is None or self.head_fits(group))
        )

    def serviceable(self) -> set[str]:
        return {g for g in GROUPS if self.is_serviceable(g)}

    def is_at_ceiling(self) -> bool:
        return self.concurrency is not None and len(self.active) >= self.concurrency

    def is_claimable(self) -> bool:
        return not self.is_queue_paused and not self.is_at_ceiling() and bool(self.serviceable())

    def admit(
        self,
        job_id: str,
        group: str,
        payload: int,
        priority: int = DEFAULT_PRIORITY,
        cost: int = 1,
    ) -> None:
        assert job_id not in self.rows, f"{job_id} admitted twice"
        assert job_id not in self.completed, f"{job_id} admitted again after it completed"
        self.rows[job_id] = Row(group, payload, priority=priority, cost=cost)
        self.is_banded = self.is_banded or priority != DEFAULT_PRIORITY
        self.is_costed = self.is_costed or cost != 1
        self.costmax = max(self.costmax, cost)
        bisect.insort(self.lanes[group], job_id, key=self.order)

    def admit_later(
        self,
        job_id: str,
        group: str,
        payload: int,
        priority: int = DEFAULT_PRIORITY,
        cost: int = 1,
    ) -> None:
        """A job admitted to the schedule (a delay far beyond the example: never promoted)."""
        assert job_id not in self.rows, f"{job_id} admitted twice"
        self.rows[job_id] = Row(group, payload, state="scheduled", priority=priority, cost=cost)
        self.is_banded = self.is_banded or priority != DEFAULT_PRIORITY
        self.is_costed = self.is_costed or cost != 1
        self.costmax = max(self.costmax, cost)

    def to_lane(self, job_id: str) -> None:
        row = self.rows[job_id]
        row.state = "pending"
        bisect.insort(self.lanes[row.lane], job_id, key=self.order)

    def lease(self, job_id: str, deadline_ms: int, is_short: bool) -> None:
        row = self.rows[job_id]
        self.lanes[row.lane].remove(job_id)
        row.state, row.attempts = "active", row.attempts + 1
        self.active[job_id] = Lease(row.lane, row.attempts, deadline_ms, is_short)
        self.tokens.append((job_id, row.attempts))

    def holds(self, job_id: str, token: int) -> bool:
        """The one settle rule: the claim that minted ``token`` holds the job while it is leased,
        or reaped and not claimed since."""
        row = self.rows.get(job_id)
        return (
            row is not None
            and row.attempts == token
            and (row.state == "active" or (row.state == "pending" and row.reaped == token))
        )

    def release(self, job_id: str) -> None:
        """A holder settles: the job leaves its lease, or (reaped) its lane, taking the stall
        the reap counted back (its holder was alive)."""
        row = self.rows[job_id]
        if row.state == "active":
            del self.active[job_id]
        else:
            self.lanes[row.lane].remove(job_id)
            row.stalled -= 1
            row.reaped = None

    def complete(self, job_id: str) -> None:
        self.release(job_id)
        self.completed_tokens[job_id] = self.rows.pop(job_id).attempts
        self.completed.add(job_id)

    def end_cancelled(self, job_id: str) -> None:
        """The job ends cancelled; a pending one leaves its lane (a leased one was released)."""
        row = self.rows.pop(job_id)
        if row.state == "pending" and job_id in self.lanes[row.lane]:
            self.lanes[row.lane].remove(job_id)
        self.cancelled_tokens[job_id] = row.attempts
        self.cancelled.add(job_id)
        self.cancel_count += 1

    def bury(self, job_id: str, error: str) -> None:
        row = self.rows[job_id]
        row.state, row.last_error = "dead", error
        self.dead.add(job_id)
        self.failed += 1


@dataclass
class Wait:
    """One serviceable lane's wait since it was last served or joined its band's ring.

    ``ahead`` holds the lanes that may be served before it — those serviceable when the wait
    began — each with the largest weight it had since. A lane that joins the ring later is
    appended behind this one, so serving it first is itself a fairness bug.
    """

    ahead: dict[str, int]
    band: int
    served: dict[str, int] = field(default_factory=dict)  # claims per lane ahead, this wait
    departed: int = 0  # the weight budget of ahead lanes that left the ring (they rejoin behind)

    @property
    def claims(self) -> int:
        return sum(self.served.values())

    @property
    def bound(self) -> int:
        return sum(self.ahead.values()) + self.departed


class Fairness:
    """Weighted round robin within a band: while a lane waits, no lane of a less urgent band is
    served, claims of more urgent bands are not its business, and each lane of its own band
    ahead of it gets at most one visit —
    at most ``weight`` consecutive claims — so the wait is at most the sum of their weights.

    A wait starts when the lane becomes serviceable, not at its last service before that: a lane
    that left the ring (emptied, paused, at its ceiling) rejoins at the tail, behind every lane
    already there — the head lane whose visit is in progress included — so counting from its
    previous service would charge it for claims it could never have had. Symmetrically, a lane
    ahead that leaves the ring rejoins behind the waiting one and may not be served before it.
    A visit may be shorter than the weight (a batch counts its jobs; a stale visit counter), never
    longer, so these are upper bounds only; the share itself is pinned by test_weighted_share.py.
    """

    def __init__(self) -> None:
        self.waits: dict[str, Wait] = {}

    def served(self, group: str, band: int) -> None:
        for lane, wait in self.waits.items():
            if lane == group or band > wait.band:
                continue
            assert band == wait.band, (
                f"lane {group!r} of band {band} was served while {lane!r} of band {wait.band} "
                "waited"
            )
            assert group in wait.ahead, f"lane {group!r} was served before {lane!r}, ahead of it"
            wait.served[group] = wait.served.get(group, 0) + 1
            assert wait.served[group] <= wait.ahead[group], (
                f"lane {group!r} had {wait.served[group]} claims while {lane!r} waited, "
                f"weight {wait.ahead[group]}"
            )
            assert wait.claims <= wait.bound, (
                f"lane {lane!r} waited {wait.claims} claims, weights allow {wait.bound}"
            )
        self.waits.pop(group, None)

    def weighted(self, group: str, weight: int) -> None:
        for wait in self.waits.values():
            if group in wait.ahead:
                wait.ahead[group] = max(wait.ahead[group], weight)

    def settle(self, model: Model) -> None:
        """After every claim and step: forget the waits of lanes that left the ring, let lanes
        ahead that left it go, start the waits of lanes that joined it (or were just served)."""
        bands = {g: model.band(g) for g in model.serviceable()}
        for lane in list(self.waits):
            if bands.get(lane) != self.waits[lane].band:
                del self.waits[lane]  # off the ring, or on another band's: a new wait
        for wait in self.waits.values():
            for lane in [g for g in wait.ahead if bands.get(g) != wait.band]:
                # Its claims stay in the total, and so does its weight in the bound.
                wait.departed += wait.ahead.pop(lane)
        for lane in set(bands) - set(self.waits):
            ahead = {g: model.weight(g) for g, b in bands.items() if g != lane and b == bands[lane]}
            self.waits[lane] = Wait(ahead, bands[lane])


# -- rates ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RateRule:
    """A rate as the model sees it: at most ``max`` claims per ``window_ms``, ``smooth`` (no
    sliding window holds more) or fixed (windows open at the first claim after the last one
    ended, as the engine's counter does)."""

    max: int
    window_ms: int
    smooth: bool


def windows_over(claims: list[int], rule: RateRule) -> list[list[int]]:
    """The windows of ``claims`` (server ms, sorted) that hold more than ``rule.max``."""
    if rule.smooth:
        return [
            window
            for i, t in enumerate(claims)
            if len(window := [u for u in claims[i:] if u < t + rule.window_ms]) > rule.max
        ]
    over, start, inside = [], None, []
    for t in claims:
        # The counter's expiry is set on the script's clock, up to 1 ms before its TIME: a claim
        # in the window's last ms may open the next one.
        if start is None or t >= start + rule.window_ms - 1:
            if len(inside) > rule.max:
                over.append(inside)
            start, inside = t, []
        inside.append(t)
    return over + ([inside] if len(inside) > rule.max else [])


def is_spent(claims: list[int], rule: RateRule, since: int, until: int) -> bool:
    """Whether a rate could be spent at some moment in [since, until] (server ms), given the
    claims it admitted: the model's reading of a claim that answered nothing."""
    if rule.smooth:
        return sum(since - rule.window_ms < t <= until for t in claims) >= rule.max
    start, inside = None, 0
    for t in claims:
        if start is None or t >= start + rule.window_ms - 1:
            start, inside = t, 0
        inside += 1
    return start is not None and start + rule.window_ms >= since and inside >= rule.max

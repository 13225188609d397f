"""Per-lane control: one tenant's pause, resume, cool, depth, ceiling, weight, rate budget and
cap.

Each verb touches that lane's settings and ring membership and nothing else in the queue.
"""

from __future__ import annotations

from typing import Any

from echomq.engine.checks import MAX_WEIGHT, count, ms, text
from echomq.engine.eta import Eta, estimate
from echomq.engine.keys import Keyspace, validate_group
from echomq.engine.options import when_run_at
from echomq.engine.policies import DEFAULT_MODE, RateMode, parse_rate
from echomq.engine.producer import lane_cap_value, lane_limit_value, lane_rate_value
from echomq.engine.publisher import Publisher
from echomq.engine.results import LaneInfo
from echomq.engine.transitions import Engine
from echomq.errors import InvalidArgument, renamed

#: Jobs one ``drain`` call deletes at most, so the server never blocks for long.
DRAIN_BUDGET = 1000


def cool_end(seconds: float | None, until: float | None, argument: str) -> tuple[int, str]:
    """When a cool ends, as ``cool.lua`` takes it: ``seconds`` from now (> 0, naming
    ``argument``) or at the Unix time ``until`` (seconds, like ``enqueue_at``'s ``when``), one
    of them; the engine's (ms, mode)."""
    if (seconds is None) == (until is None):
        # Neither given names the main argument; both, the one to drop.
        raise InvalidArgument(argument, seconds, f"give either {argument} or until")
    if seconds is not None:
        return ms(seconds, argument, positive=True), "in"
    assert until is not None
    return when_run_at(until, "until"), "at"


def lane_info(row: list[Any]) -> LaneInfo:
    """One lane's 12 fields as ``lanes.lua`` answers them."""
    group, depth, active, limit, weight, rate, paused, wait, cap, scheduled, cool_at, cool_left = (
        row
    )
    found = parse_rate(rate)
    return LaneInfo(
        lane=text(group),
        depth=int(depth),
        active=int(active),
        limit=int(limit),
        weight=int(weight),
        rate=None if found is None else (found.max, found.window),
        paused=bool(paused),
        rate_wait=int(wait) / 1000,
        rate_mode=None if found is None else found.mode,
        cap=int(cap),
        scheduled=int(scheduled),
        cooling_until=int(cool_at) / 1000 if int(cool_at) else None,
        cooling=int(cool_left) / 1000,
    )


async def drain_lanes(engine: Engine, group: str, schedule: bool, results: bool = False) -> int:
    """Delete pending jobs of ``group`` ("" = every lane), in bounded steps; the count."""
    total = 0
    while True:
        deleted, more = await engine.drain(group, schedule, DRAIN_BUDGET, results)
        total += deleted
        if not more:
            return total


class Lane:
    """A handle on one lane of a queue: ``queue.lane("PLR0KHTOWnGLuC")``."""

    def __init__(
        self, engine: Engine, keys: Keyspace, lane: str, events: Publisher | None = None
    ) -> None:
        self._engine = engine
        self._keys = keys
        self._events = events
        #: The lane's name.
        self.lane = validate_group(lane)

    @property
    def group(self) -> str:
        """Deprecated: :attr:`lane`, the same value."""
        renamed("Lane.group", "Lane.lane")
        return self.lane

    def __repr__(self) -> str:
        return f"Lane({self._keys.queue!r}, {self.lane!r})"

    async def pause(self) -> bool:
        """Stop serving this lane; its backlog and in-flight jobs are kept. False if paused."""
        return await self._engine.pause_lane(self.lane)

    async def resume(self) -> bool:
        """Serve this lane again (it rejoins the ring if it has work), ending its cool too.
        False if it was neither paused nor cooling."""
        return await self._engine.resume_lane(self.lane)

    async def cool(self, seconds: float | None = None, *, until: float | None = None) -> bool:
        """Take this lane off the ring for ``seconds``, or until the Unix time ``until``: no
        worker claims from it until then (an upstream answered 429 for this tenant); the other
        lanes keep being served. When the time comes it rejoins the ring by itself, waking
        parked consumers; :meth:`uncool` (or :meth:`resume`) ends it early. A cool never
        shortens one in force: False when the lane cools that long already. Pause and cool are
        separate: a paused lane stays paused when its cool ends.
        """
        at, mode = cool_end(seconds, until, "seconds")
        cooled, _, ends = await self._engine.cool_lane(self.lane, at, mode)
        if cooled:
            self._emit({"event": "cooling", "until": ends / 1000})
        return cooled

    async def uncool(self) -> bool:
        """End this lane's cool now (it rejoins the ring if it has work; a paused lane stays
        paused). False if it was not cooling."""
        uncooled = await self._engine.uncool_lane(self.lane)
        if uncooled:
            self._emit({"event": "uncooled"})
        return uncooled

    def _emit(self, event: dict[str, Any]) -> None:
        if self._events is not None and self._events.listened():
            self._events.emit([{**event, "job": None, "group": self.lane}])

    async def depth(self) -> int:
        """Pending jobs waiting in this lane."""
        return int(await self._engine.wire.call("ZCARD", self._keys.lane(self.lane)))

    async def limit(self, ceiling: int | None) -> bool:
        """At most ``ceiling`` jobs of this lane leased at once; ``None`` removes the lane's own
        ceiling (it follows the queue's default policy). False: it held that value already."""
        return await self._engine.lane_setting(self.lane, "glimit", lane_limit_value(ceiling))

    async def weight(self, weight: int | None) -> bool:
        """Serve this lane up to ``weight`` consecutive claims per ring visit (default 1).
        False: it held that value already."""
        value = "" if weight is None else count(weight, "weight", maximum=MAX_WEIGHT)
        return await self._engine.lane_setting(self.lane, "gweight", value)

    async def rate(
        self, max: int | None, window: float | None = None, *, mode: RateMode = DEFAULT_MODE
    ) -> bool:
        """At most ``max`` claims per ``window`` seconds from this lane; ``None`` removes it.

        ``mode="smooth"`` (the default): no ``window`` seconds ever hold more than ``max``
        claims; ``"fixed"``: back-to-back windows of ``max`` each. A lane that spends its budget
        leaves the ring and returns when a claim fits again; the other lanes keep being served.
        Idempotent: setting the rate in force changes nothing (False); a change carries the
        window in flight on, never granting a fresh budget (docs/concepts/gates.md).
        """
        value = lane_rate_value(max, window, mode)
        return await self._engine.lane_setting(self.lane, "grate", value)

    async def cap(self, cap: int | None) -> bool:
        """Admit a job to this lane only while it holds fewer than ``cap`` unfinished jobs
        (pending, leased and scheduled); beyond, an enqueue raises :class:`~echomq.LaneFull`
        and a batch item answers ``rejected``, nothing written. ``None`` removes the lane's own
        cap (it follows the queue's default policy). False: it held that value already."""
        return await self._engine.lane_setting(self.lane, "gcap", lane_cap_value(cap))

    async def eta(self) -> Eta:
        """Where a job enqueued on this lane now would stand: its place (the lane's depth) and
        its estimated wait until a claim, from the lane's weight among the lanes with work, its
        rate and ceiling and the queue's measured claim rate; ``seconds`` None (with the
        reason in ``bound``) when the lane is paused or cooling
        (docs/guides/where-a-tenant-stands.md)."""
        reply = await self._engine.eta("", self.lane)
        assert reply is not None  # a lane always answers
        return estimate(reply)

    async def info(self) -> LaneInfo:
        return lane_info((await self._engine.lanes((self.lane,)))[0])

    async def drain(self) -> int:
        """Delete this lane's pending jobs; leased ones and the lane's settings survive."""
        return await drain_lanes(self._engine, self.lane, False)

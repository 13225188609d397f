"""Per-lane control: one tenant's pause, resume, depth, ceiling, weight and rate budget.

Each verb touches that lane's settings and ring membership and nothing else in the queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._checks import MAX_CEILING, MAX_RATE, MAX_WEIGHT, count, ms, text
from ._errors import InvalidArgument
from ._keys import validate_group
from ._results import LaneInfo

if TYPE_CHECKING:
    from ._queue import Queue


def lane_info(row: list[Any]) -> LaneInfo:
    """One lane's 8 fields as ``lanes.lua`` answers them."""
    group, depth, active, limit, weight, rate, paused, wait = row
    budget = None
    if rate_text := text(rate):
        most, window = rate_text.split(":")
        budget = (int(most), int(window) / 1000)
    return LaneInfo(
        group=text(group),
        depth=int(depth),
        active=int(active),
        limit=int(limit),
        weight=int(weight),
        rate=budget,
        paused=bool(paused),
        rate_wait=int(wait) / 1000,
    )


class Lane:
    """A handle on one lane of a queue: ``queue.lane("PLR0KHTOWnGLuC")``."""

    def __init__(self, queue: Queue, group: str) -> None:
        self.queue = queue
        self.group = validate_group(group)

    def __repr__(self) -> str:
        return f"Lane({self.queue.name!r}, {self.group!r})"

    async def pause(self) -> bool:
        """Stop serving this lane; its backlog and in-flight jobs are kept. False if paused."""
        return bool(await self.queue._run("pause", (self.group,)))

    async def resume(self) -> bool:
        """Serve this lane again (it rejoins the ring if it has work). False if not paused."""
        return bool(await self.queue._run("resume", (self.group,)))

    async def depth(self) -> int:
        """Pending jobs waiting in this lane."""
        return int(await self.queue.wire.call("ZCARD", self.queue.keys.lane(self.group)))

    async def limit(self, ceiling: int | None) -> None:
        """At most ``ceiling`` jobs of this lane leased at once; ``None`` removes the ceiling."""
        value = "" if ceiling is None else count(ceiling, "ceiling", maximum=MAX_CEILING)
        await self.queue._run("lane_limit", (self.group, "glimit", value))

    async def weight(self, weight: int | None) -> None:
        """Serve this lane up to ``weight`` consecutive claims per ring visit (default 1)."""
        value = "" if weight is None else count(weight, "weight", maximum=MAX_WEIGHT)
        await self.queue._run("lane_limit", (self.group, "gweight", value))

    async def rate(self, max: int | None, window: float | None = None) -> None:
        """At most ``max`` claims per ``window`` seconds from this lane; ``None`` removes it.

        A lane that spends its budget leaves the ring and returns when its window ends; the
        other lanes keep being served meanwhile.
        """
        if max is None:
            value = ""
        else:
            most = count(max, "max", maximum=MAX_RATE)
            if window is None:
                raise InvalidArgument("window", window, "a rate needs a window in seconds")
            value = f"{most}:{ms(window, 'window', positive=True)}"
        await self.queue._run("lane_limit", (self.group, "grate", value))

    async def info(self) -> LaneInfo:
        row = await self.queue._run("lanes", (self.group,))
        return lane_info(row)

    async def drain(self) -> int:
        """Delete this lane's pending jobs; leased ones and the lane's settings survive."""
        return await self.queue._drain(self.group, False)

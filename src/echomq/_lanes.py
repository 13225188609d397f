"""Per-lane control: one tenant's pause, resume, depth, ceiling, weight and rate budget.

Each verb touches that lane's settings and ring membership and nothing else in the queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import InvalidArgument
from ._keys import validate_group
from ._results import LaneInfo

if TYPE_CHECKING:
    from ._queue import Queue


def lane_info(row: list[object]) -> LaneInfo:
    group, depth, active, limit, weight, rate, paused, wait = row
    rate_text = rate.decode() if isinstance(rate, bytes) else str(rate)
    budget = None
    if rate_text:
        most, window = rate_text.split(":")
        budget = (int(most), int(window) / 1000)
    return LaneInfo(
        group=group.decode() if isinstance(group, bytes) else str(group),
        depth=int(depth),  # type: ignore[call-overload]
        active=int(active),  # type: ignore[call-overload]
        limit=int(limit),  # type: ignore[call-overload]
        weight=int(weight),  # type: ignore[call-overload]
        rate=budget,
        paused=bool(paused),
        rate_wait=int(wait) / 1000,  # type: ignore[call-overload]
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
        value = "" if ceiling is None else _positive(ceiling, "ceiling")
        await self.queue._run("lane_limit", (self.group, "glimit", value))

    async def weight(self, weight: int | None) -> None:
        """Serve this lane up to ``weight`` consecutive claims per ring visit (default 1)."""
        value = "" if weight is None else _positive(weight, "weight")
        await self.queue._run("lane_limit", (self.group, "gweight", value))

    async def rate(self, max: int | None, window: float | None = None) -> None:
        """At most ``max`` claims per ``window`` seconds from this lane; ``None`` removes it.

        A lane that spends its budget leaves the ring and returns when its window ends; the
        other lanes keep being served meanwhile.
        """
        from ._queue import ms

        if max is None:
            value = ""
        else:
            if window is None:
                raise InvalidArgument("window", window, "a rate needs a window in seconds")
            value = f"{_positive(max, 'max')}:{ms(window, 'window', positive=True)}"
        await self.queue._run("lane_limit", (self.group, "grate", value))

    async def info(self) -> LaneInfo:
        row = await self.queue._run("lanes", (self.group,))
        return lane_info(row)

    async def drain(self) -> int:
        """Delete this lane's pending jobs; leased ones and the lane's settings survive."""
        return await self.queue._drain(self.group, False)


def _positive(value: int, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(argument, value, "must be an integer >= 1")
    return value

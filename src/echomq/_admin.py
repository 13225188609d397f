"""The queue's read plane and admin verbs: counts, rows, lanes, queue-wide settings, cleanup.

Reads are pure; admin verbs are one Lua transition each and refuse what would lose a leased job.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any

from . import _ids
from ._checks import MAX_CEILING, MAX_LIMIT, MAX_RATE, count, ms, text
from ._codec import Codec
from ._connector import Arg
from ._errors import InvalidArgument
from ._keys import Keyspace, validate_group
from ._lanes import Lane, lane_info
from ._pool import Wire
from ._results import Counts, JobInfo, JobState, LaneInfo

_BUDGET = 1000
_STATES = frozenset({"pending", "active", "scheduled", "dead"})


class QueueAdmin:
    """Mixed into :class:`echomq.Queue`."""

    name: str
    keys: Keyspace
    wire: Wire
    codec: Codec

    def _run(self, script: str, args: Sequence[Arg] = ()) -> Awaitable[Any]:
        raise NotImplementedError

    # -- lanes ---------------------------------------------------------------------------------

    def lane(self, group: str) -> Lane:
        """The control handle of one lane (validates the group name)."""
        return Lane(self, group)  # type: ignore[arg-type]

    async def lanes(self, groups: Sequence[str] = ()) -> list[LaneInfo]:
        """State of the given lanes, or of every lane that holds work or settings."""
        names = [validate_group(g) for g in groups]
        flat = await self._run("lanes", names)
        return [lane_info(flat[i : i + 8]) for i in range(0, len(flat), 8)]

    async def ring(self) -> list[str]:
        """The rota: serviceable lanes in the order they will be served."""
        return [text(g) for g in await self.wire.call("LRANGE", self.keys.ring, 0, -1)]

    # -- queue-wide settings -------------------------------------------------------------------

    async def pause(self) -> None:
        """Pause the whole queue: claims answer empty, admission continues."""
        await self._run("configure", ("paused", 1))

    async def resume(self) -> None:
        await self._run("configure", ("paused", ""))

    async def is_paused(self) -> bool:
        return bool(await self.wire.call("HEXISTS", self.keys.meta, "paused"))

    async def concurrency(self, ceiling: int | None) -> None:
        """At most ``ceiling`` jobs of the queue leased at once; ``None`` removes the ceiling."""
        value = "" if ceiling is None else count(ceiling, "ceiling", maximum=MAX_CEILING)
        await self._run("configure", ("concurrency", value))

    async def rate_limit(self, max: int | None, window: float | None = None) -> None:
        """At most ``max`` claims per ``window`` seconds across every worker; ``None`` removes it.

        The check and the spend happen inside the claim script, so every worker on every host
        shares the one budget. Takes effect at once, without restarting workers.
        """
        if max is None:
            await self._run("configure", ("max", "", "window", ""))
            return
        count(max, "max", maximum=MAX_RATE)
        if window is None:
            raise InvalidArgument("window", window, "a rate limit needs a window in seconds")
        await self._run("configure", ("max", max, "window", ms(window, "window", positive=True)))

    async def rate_limit_ttl(self) -> float:
        """Seconds until the queue's rate window admits claims again (0 = it admits now)."""
        meta, spent, ttl = await self.wire.call_many(
            [
                ("HGET", self.keys.meta, "max"),
                ("GET", self.keys.limiter),
                ("PTTL", self.keys.limiter),
            ]
        )
        if meta is None or spent is None or int(spent) < int(meta) or ttl <= 0:
            return 0.0
        return int(ttl) / 1000

    # -- read plane ----------------------------------------------------------------------------

    async def counts(self) -> Counts:
        return Counts(*(int(n) for n in await self._run("counts")))

    async def job(self, id: str) -> JobInfo | None:
        """A job's row, or None when no such job exists (completed jobs are deleted)."""
        row = await self.wire.call("HGETALL", self.keys.job(_ids.validate(id, argument="job id")))
        return self._job_info(id, row)

    def _job_info(self, id: str, row: dict[bytes, bytes]) -> JobInfo | None:
        if not row:
            return None
        fields = {text(k): v for k, v in row.items()}
        return JobInfo(
            id=id,
            state=text(fields["state"]),  # type: ignore[arg-type]
            attempts=int(fields["attempts"]),
            payload=self.codec.decode(fields["payload"]),
            group=text(fields.get("group", b"_")),
            last_error=text(fields["last_error"]) if "last_error" in fields else None,
            stalled=int(fields.get("stalled", 0)),
            progress=text(fields["progress"]) if "progress" in fields else None,
        )

    async def state(self, id: str) -> JobState:
        """``pending`` (waiting in its lane), ``active``, ``scheduled``, ``dead`` or ``absent``."""
        state = await self.wire.call(
            "HGET", self.keys.job(_ids.validate(id, argument="job id")), "state"
        )
        name = text(state) if state is not None else "absent"
        return name if name in _STATES else "absent"  # type: ignore[return-value]

    async def dead(self, limit: int = 100) -> list[JobInfo]:
        """Dead-lettered jobs, oldest death first."""
        count(limit, "limit", maximum=MAX_LIMIT)
        ids = [text(i) for i in await self.wire.call("ZRANGE", self.keys.dead, 0, limit - 1)]
        if not ids:
            return []
        rows = await self.wire.call_many([("HGETALL", self.keys.job(i)) for i in ids])
        jobs = (self._job_info(i, row) for i, row in zip(ids, rows, strict=True))
        return [job for job in jobs if job is not None]

    # -- admin ---------------------------------------------------------------------------------

    async def _drain(self, group: str, schedule: bool) -> int:
        total = 0
        while True:
            deleted, more = await self._run("drain", (group, int(schedule), _BUDGET))
            total += int(deleted)
            if not more:
                return total

    async def drain(self, *, schedule: bool = False) -> int:
        """Delete every pending job (and scheduled ones with ``schedule``); leased jobs survive."""
        return await self._drain("", schedule)

    async def obliterate(self, *, force: bool = False) -> None:
        """Delete every key of the queue. Refuses unless paused, and with leased jobs unless
        ``force``. Runs in bounded steps so the server never blocks for long."""
        while await self._run("obliterate", (int(force), _BUDGET)):
            pass

    async def remove(self, id: str) -> bool:
        """Delete a job that is not leased; False when it does not exist. Raises
        :class:`LockedError` for a leased job."""
        return bool(await self._run("remove", (_ids.validate(id, "JOB", "job id"),)))

    async def reassign(self, id: str, group: str) -> bool:
        """Move a pending job to another lane. False when the job does not exist."""
        args = (_ids.validate(id, "JOB", "job id"), validate_group(group))
        return bool(await self._run("reassign", args))

    async def reprocess(self, id: str) -> bool:
        """Return a dead job to its lane with a fresh failure budget. False when it is gone;
        :class:`StateError` when it is not dead."""
        return bool(await self._run("reprocess", (_ids.validate(id, "JOB", "job id"),)))

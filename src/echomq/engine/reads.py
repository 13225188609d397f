"""The queue's read plane: counts, job rows and states, dead letters, lanes and the ring.

Reads are pure: nothing here writes. :class:`echomq.Queue` holds one and exposes its reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from echomq.engine import ids as _ids
from echomq.engine.checks import MAX_LIMIT, count, ms, text
from echomq.engine.eta import Eta, estimate, estimate_all
from echomq.engine.keys import Keyspace, validate_dedup, validate_group
from echomq.engine.lanes import lane_info
from echomq.engine.options import PRIORITY_DEFAULT
from echomq.engine.policies import Fairness, Policies, Policy, Rate, parse_rate
from echomq.engine.producer import job_info, job_state
from echomq.engine.results import Counts, JobInfo, JobState, LaneInfo
from echomq.engine.transitions import Engine
from echomq.wire.codec import Codec
from echomq.wire.pool import Wire


class Reads:
    """What one queue holds (see :class:`echomq.Queue` for each read)."""

    def __init__(self, engine: Engine, keys: Keyspace, codec: Codec) -> None:
        self._engine = engine
        self._keys = keys
        self._codec = codec

    async def counts(self) -> Counts:
        return Counts(*await self._engine.counts())

    async def has_work(self, scheduled_within: float) -> bool:
        return await self._engine.has_work(ms(scheduled_within, "scheduled_within"))

    async def lanes(self, groups: Sequence[str]) -> list[LaneInfo]:
        names = [validate_group(g) for g in groups]
        return [lane_info(row) for row in await self._engine.lanes(names)]

    async def ring(self) -> list[str]:
        # Every band's ring, the most urgent first (the default band's alone in a queue that
        # never used priorities: meta `bands`, the other bands in use, is absent).
        wire, keys = self._engine.wire, self._keys
        bands = {int(p) for p in text(await wire.call("HGET", keys.meta, "bands") or b"")}
        lanes: list[str] = []
        for band in sorted(bands | {PRIORITY_DEFAULT}, reverse=True):
            lanes += [text(g) for g in await wire.call("LRANGE", keys.band_ring(band), 0, -1)]
        return lanes

    async def is_paused(self) -> bool:
        return bool(await self._engine.wire.call("HEXISTS", self._keys.meta, "paused"))

    async def is_ordered(self) -> bool:
        return bool(await self._engine.wire.call("HEXISTS", self._keys.meta, "ordered"))

    async def rate_limit_ttl(self) -> float:
        return (await queue_rate(self._engine.wire, self._keys)).wait

    async def fairness(self) -> Fairness:
        fair, quantum = await self._engine.wire.call("HMGET", self._keys.meta, "fair", "quantum")
        return Fairness.from_meta(fair, quantum)

    async def policies(self) -> Policies:
        meta, named = await self._engine.wire.call_many(
            [
                ("HMGET", self._keys.meta, "dlimit", "dweight", "drate", "dcap"),
                ("HGETALL", self._keys.policies),
            ]
        )
        limit, weight, rate, cap = (text(v) if v is not None else "" for v in meta)
        default = Policy(
            rate=parse_rate(rate),
            limit=int(limit) if limit else None,
            weight=int(weight) if weight else None,
            cap=int(cap) if cap else None,
        )
        lanes = {text(g): Policy.from_json(raw) for g, raw in sorted(named.items())}
        return Policies(default, lanes)

    async def job(self, id: str) -> JobInfo | None:
        key = self._keys.job(_ids.validate(id, "JOB", "job id"))
        return self._job_info(id, await self._engine.wire.call("HGETALL", key))

    async def dedup_job(self, key: str) -> str | None:
        seen = await self._engine.wire.call("GET", self._keys.dedup(validate_dedup(key)))
        return None if seen is None else text(seen)

    async def position(self, id: str) -> Eta | None:
        reply = await self._engine.eta(_ids.validate(id, "JOB", "job id"), "")
        return None if reply is None else estimate(reply)

    async def etas(self) -> dict[str, Eta]:
        reply = await self._engine.eta("", "")
        assert reply is not None  # the listing always answers
        return estimate_all(reply)

    def _job_info(self, id: str, row: dict[bytes, bytes]) -> JobInfo | None:
        return job_info(id, row, self._codec)

    async def state(self, id: str) -> JobState:
        key = self._keys.job(_ids.validate(id, "JOB", "job id"))
        return job_state(await self._engine.wire.call("HGET", key, "state"))

    async def dead(self, limit: int) -> list[JobInfo]:
        count(limit, "limit", maximum=MAX_LIMIT)
        wire = self._engine.wire
        ids = [text(i) for i in await wire.call("ZRANGE", self._keys.dead, 0, limit - 1)]
        if not ids:
            return []
        rows = await wire.call_many([("HGETALL", self._keys.job(i)) for i in ids])
        jobs = (self._job_info(i, row) for i, row in zip(ids, rows, strict=True))
        return [job for job in jobs if job is not None]


@dataclass(frozen=True, slots=True)
class QueueRate:
    """The queue-wide rate as it stands: its ``rate`` (None: none), the claims ``spent`` in
    its window (fixed) or in the last window (smooth), ``wait`` seconds until it admits again."""

    rate: Rate | None
    spent: int
    wait: float


async def queue_rate(wire: Wire, keys: Keyspace) -> QueueRate:
    """Read the queue's rate and where it stands (a pure read: the claim trims the log)."""
    meta, spent, ttl, log, now = await wire.call_many(
        [
            ("HMGET", keys.meta, "max", "window", "mode"),
            ("GET", keys.limiter),
            ("PTTL", keys.limiter),
            ("LRANGE", keys.claims, 0, -1),
            ("TIME",),
        ]
    )
    most, window, mode = (text(v) if v is not None else "" for v in meta)
    if not most or not window:
        return QueueRate(None, 0, 0.0)
    rate = parse_rate(f"{most}:{window}:{mode}")
    assert rate is not None
    if rate.mode == "fixed":
        used = int(spent) if spent is not None else 0
        wait = int(ttl) / 1000 if used >= rate.max and ttl > 0 else 0.0
        return QueueRate(rate, used, wait)
    now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
    inside = [int(t) for t in log if int(t) > now_ms - int(window)]
    wait_ms = inside[-rate.max] + int(window) - now_ms if len(inside) >= rate.max else 0
    return QueueRate(rate, len(inside), max(0, wait_ms) / 1000)

"""One read of everything an operator watches on a queue: counts, lanes, the ring, the queue-wide
limiter and the dead letters. The dashboard, ``/metrics`` and the CLI all read through here.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from typing import Any

from echomq.engine.checks import text
from echomq.engine.eta import Eta
from echomq.engine.policies import Policies, Policy, Rate
from echomq.engine.queue import Queue
from echomq.engine.reads import queue_rate
from echomq.engine.rebalancer import Budgets
from echomq.engine.results import Counts, JobInfo, LaneInfo
from echomq.engine.shard_stats import ShardStats, read_shard_figures
from echomq.engine.sharded import ShardedQueue


@dataclass(frozen=True, slots=True)
class Limiter:
    """The queue-wide rate limit: ``max`` claims per ``window`` seconds (None: no limit),
    ``spent`` claims in the current window, ``wait`` seconds until it admits again (0 = now)."""

    max: int | None
    window: float | None
    spent: int
    wait: float
    mode: str | None = None  # "smooth" or "fixed"; None: no limit


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """A queue as one read saw it (several pipelined reads: not one atomic instant)."""

    name: str
    paused: bool
    concurrency: int | None
    limiter: Limiter
    counts: Counts
    lanes: list[LaneInfo]
    ring: list[str]
    dead: list[JobInfo]
    #: The lane policies in force (the default, and the lanes named), as the engine holds them.
    policies: Policies | None = None
    #: Each lane with work: where a job enqueued on it now would stand (``queue.etas()``).
    etas: dict[str, Eta] = field(default_factory=dict)
    #: A sharded queue's shards, each as read (empty for a queue of one slot).
    shards: list[ShardStats] = field(default_factory=list)

    @property
    def service_rate(self) -> float:
        """The queue's measured claims per second (0.0: none lately, or no lane with work);
        a sharded queue's is the sum of its shards'."""
        if self.shards:
            return sum(shard.claims_per_second for shard in self.shards)
        return next((eta.service_rate for eta in self.etas.values()), 0.0)

    def as_json(self) -> dict[str, Any]:
        """Plain JSON types; dead jobs without their payloads (they may be large or private)."""
        return {
            "name": self.name,
            "paused": self.paused,
            "concurrency": self.concurrency,
            "limiter": {
                "max": self.limiter.max,
                "window": self.limiter.window,
                "spent": self.limiter.spent,
                "wait": self.limiter.wait,
                "mode": self.limiter.mode,
            },
            "counts": {
                field: getattr(self.counts, field) for field in self.counts.__dataclass_fields__
            },
            "lanes": [
                {
                    "group": lane.lane,
                    "depth": lane.depth,
                    "active": lane.active,
                    "limit": lane.limit,
                    "weight": lane.weight,
                    "rate": None if lane.rate is None else list(lane.rate),
                    "rate_mode": lane.rate_mode,
                    "paused": lane.paused,
                    "rate_wait": lane.rate_wait,
                    "cap": lane.cap,
                    "scheduled": lane.scheduled,
                    "cooling": lane.cooling,
                    "cooling_until": lane.cooling_until,
                    "eta": eta_json(self.etas.get(lane.lane)),
                }
                for lane in self.lanes
            ],
            "service_rate": self.service_rate,
            "shards": [asdict(shard) for shard in self.shards],
            "ring": self.ring,
            "policies": None
            if self.policies is None
            else {
                "default": _policy_json(self.policies.default),
                # Names only, sorted: a queue may name many tenants; the lanes table shows the
                # settings in force of the lanes it lists.
                "named": sorted(self.policies.lanes),
            },
            "dead": [
                {
                    "id": job.id,
                    "group": job.lane,
                    "attempts": job.attempts,
                    "last_error": job.last_error,
                }
                for job in self.dead
            ],
        }


def eta_json(eta: Eta | None) -> dict[str, Any] | None:
    """A lane's ETA as the CLI and the dashboard show it: its place, seconds (None: no
    estimate, ``bound`` says why), the claims/s its lane gets and what sets them."""
    if eta is None:
        return None
    return {"position": eta.position, "seconds": eta.seconds, "rate": eta.rate, "bound": eta.bound}


def _policy_json(policy: Policy) -> dict[str, Any]:
    rate = policy.rate
    return {
        "rate": [rate.max, rate.window, rate.mode] if isinstance(rate, Rate) else None,
        "limit": policy.limit,
        "weight": policy.weight,
        "cap": policy.cap,
    }


Settings = tuple[tuple[bool, int | None, Limiter], list[ShardStats]]


async def _sharded_settings(queue: ShardedQueue) -> tuple[Settings, Counts]:
    """A sharded queue's pause (every shard's) and gates: the directory's budgets, not shard
    0's meta (which holds its quota), read beside each shard's figures; and its counts, summed
    from those figures' reads."""
    (shards, counts), budgets = await asyncio.gather(
        read_shard_figures(queue.shards), queue.rebalancer.budgets()
    )
    paused = all(shard.paused for shard in shards)  # as is_paused: the whole queue
    concurrency, limiter = _budget_limiter(budgets, shards)
    return ((paused, concurrency, limiter), shards), counts


async def _settings(queue: Queue) -> tuple[Settings, Counts]:
    meta, rate, counts = await asyncio.gather(
        queue.wire.call("HGETALL", queue.keys.meta),
        queue_rate(queue.wire, queue.keys),
        queue.counts(),
    )
    fields = {text(k): text(v) for k, v in meta.items()}
    concurrency = int(fields["concurrency"]) if fields.get("concurrency") else None
    if rate.rate is None:
        limiter = Limiter(None, None, rate.spent, rate.wait)
    else:
        limiter = Limiter(rate.rate.max, rate.rate.window, rate.spent, rate.wait, rate.rate.mode)
    return ((bool(fields.get("paused")), concurrency, limiter), []), counts


async def read_snapshot(queue: Queue, *, dead: int = 50) -> QueueSnapshot:
    """Read ``queue`` (up to ``dead`` dead letters, oldest first; 0 skips them); a sharded
    queue's figures are every shard's, summed or merged, with each shard's beside them."""
    (settings, counts), lanes, ring, policies, etas = await asyncio.gather(
        _sharded_settings(queue) if isinstance(queue, ShardedQueue) else _settings(queue),
        queue.lanes(),
        queue.ring(),
        queue.policies(),
        queue.etas(),
    )
    (paused, concurrency, limiter), shards = settings
    dead_jobs = await queue.dead(dead) if dead > 0 else []
    return QueueSnapshot(
        queue.name,
        paused,
        concurrency,
        limiter,
        counts,
        lanes,
        ring,
        dead_jobs,
        policies,
        etas,
        shards,
    )


def _budget_limiter(budgets: Budgets, shards: list[ShardStats]) -> tuple[int | None, Limiter]:
    """A sharded queue's ceiling and rate as an operator reads them: the budgets, the claims
    every shard spent in its window (summed), and the soonest any shard holding a rate quota
    admits again (0.0: one admits now, or none holds any yet: the rebalancer hands it out)."""
    if budgets.rate is None:
        return budgets.concurrency, Limiter(None, None, 0, 0.0)
    most, window_ms, mode = budgets.rate
    waits = [shard.rate_wait for shard in shards if shard.rate_quota]
    return budgets.concurrency, Limiter(
        most,
        window_ms / 1000,
        sum(shard.rate_spent for shard in shards),
        min(waits, default=0.0),
        mode or "fixed",
    )


async def queue_exists(queue: Queue) -> bool:
    """Whether any of the queue's fixed keys exists (a queue never used has none)."""
    return int(await queue.wire.call("EXISTS", *queue.keys.all_fixed())) > 0

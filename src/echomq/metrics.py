"""Prometheus metrics for echomq: the engine read on each scrape, plus what consumers report.

``Metrics(queues)`` registers, on one ``CollectorRegistry``, a collector that reads every queue
(counts by state, the engine's completed/dead counters and measured claim rate, each lane's
depth, in-flight, weight, ceiling, paused and rate state and ETA) and two series the consumers
feed through the ``observer`` hook: the wait from mint to claim per lane, and settles per lane
and outcome. A sharded queue's series are its whole queue's, and a family of its own,
``echomq_shard_*``, gives each shard's (label ``shard``, at most the shard count per queue;
its quotas of the queue-wide gates by ``gate``, beside the budgets they split).
Applications register their own counters on ``metrics.registry``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from echomq._extras import missing

try:
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.exposition import generate_latest
    from prometheus_client.registry import Collector
    from starlette.requests import Request
    from starlette.responses import Response
except ImportError as exc:  # /metrics is an extra
    raise ImportError(missing("metrics", "echomq.metrics")) from exc

from echomq.consumers.ledger import Observer, Outcome
from echomq.engine.checks import count
from echomq.engine.queue import Queue
from echomq.engine.results import Job
from echomq.engine.snapshot import QueueSnapshot, read_snapshot
from echomq.ops.observations import OTHER_LANE, Observations, lane_label, lane_of_label

__all__ = [
    "CONTENT_TYPE",
    "OTHER_LANE",
    "WAIT_BUCKETS",
    "Metrics",
    "Observer",
    "Outcome",
    "lane_label",
    "lane_of_label",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Seconds; a claim minutes after its mint is a backlog worth seeing, not a rounding error.
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_STATES = ("pending", "active", "scheduled", "dead")
#: A shard's jobs per state: the ``state`` label -> the ``ShardStats`` field.
_SHARD_STATES = {"pending": "pending", "active": "leased", "scheduled": "scheduled", "dead": "dead"}
_Family = GaugeMetricFamily | CounterMetricFamily


class _EngineCollector(Collector):
    """Turns the snapshots of the last refresh into metric families (collect() is sync)."""

    def __init__(self, max_lanes: int) -> None:
        self.max_lanes = max_lanes
        self.snapshots: list[QueueSnapshot] = []

    def describe(self) -> Iterable[Metric]:
        # Lets the registry refuse a clashing name at registration, without reading the engine.
        return [*self._families()[0].values(), *self._shard_families().values()]

    def collect(self) -> Iterable[Metric]:
        families, lanes = self._families()
        shards = self._shard_families()
        for snap in self.snapshots:
            q = snap.name
            for shard in snap.shards:
                labels = [q, str(shard.shard)]
                for state, name in _SHARD_STATES.items():
                    shards["jobs"].add_metric([*labels, state], getattr(shard, name))
                shards["lanes"].add_metric(labels, shard.lanes)
                shards["weight"].add_metric(labels, shard.weight)
                shards["service_rate"].add_metric(labels, shard.claims_per_second)
                shards["info"].add_metric([*labels, shard.tag, shard.primary], 1)
                for gate, quota in (
                    ("concurrency", shard.concurrency_quota),
                    ("rate", shard.rate_quota),
                ):
                    if quota is not None:  # no budget of that gate: no sample
                        shards["quota"].add_metric([*labels, gate], quota)
            if snap.shards:
                budgets = (("concurrency", snap.concurrency), ("rate", snap.limiter.max))
                for gate, budget in budgets:
                    if budget is not None:
                        shards["budget"].add_metric([q, gate], budget)
            c = snap.counts
            for state in _STATES:
                families["jobs"].add_metric([q, state], getattr(c, state))
            families["completed"].add_metric([q], c.completed)
            families["failed"].add_metric([q], c.failed)
            families["lanes"].add_metric([q], c.lanes)
            families["ring"].add_metric([q], c.ringed)
            families["paused"].add_metric([q], int(snap.paused))
            families["rate_wait"].add_metric([q], snap.limiter.wait)
            families["cooling"].add_metric([q], sum(1 for lane in snap.lanes if lane.cooling))
            families["service_rate"].add_metric([q], snap.service_rate)
            shown = sorted(snap.lanes, key=lambda lane: -(lane.depth + lane.active))
            for lane in shown[: self.max_lanes]:
                labels = [q, lane_label(lane.lane)]
                lanes["lane_depth"].add_metric(labels, lane.depth)
                lanes["lane_active"].add_metric(labels, lane.active)
                lanes["lane_weight"].add_metric(labels, lane.weight)
                lanes["lane_limit"].add_metric(labels, lane.limit)
                lanes["lane_paused"].add_metric(labels, int(lane.paused))
                lanes["lane_rate_wait"].add_metric(labels, lane.rate_wait)
                lanes["lane_cooling"].add_metric(labels, lane.cooling)
                eta = snap.etas.get(lane.lane)
                if eta is not None and eta.seconds is not None:  # no estimate: no sample
                    lanes["lane_eta"].add_metric(labels, eta.seconds)
            rest = shown[self.max_lanes :]
            if rest:
                lanes["lane_depth"].add_metric([q, OTHER_LANE], sum(r.depth for r in rest))
                lanes["lane_active"].add_metric([q, OTHER_LANE], sum(r.active for r in rest))
        return [*families.values(), *lanes.values(), *shards.values()]

    def _families(self) -> tuple[dict[str, _Family], dict[str, _Family]]:
        queue, lane = ["queue"], ["queue", "lane"]
        families: dict[str, _Family] = {
            "jobs": GaugeMetricFamily(
                "echomq_jobs", "Jobs in the engine by state", labels=["queue", "state"]
            ),
            "completed": CounterMetricFamily(
                "echomq_completed", "Jobs completed (engine counter, every worker)", labels=queue
            ),
            "failed": CounterMetricFamily(
                "echomq_failed", "Jobs dead-lettered (engine counter, every worker)", labels=queue
            ),
            "lanes": GaugeMetricFamily("echomq_lanes", "Lanes holding pending jobs", labels=queue),
            "ring": GaugeMetricFamily("echomq_ring_lanes", "Lanes on the ring now", labels=queue),
            "paused": GaugeMetricFamily("echomq_queue_paused", "1 when paused", labels=queue),
            "rate_wait": GaugeMetricFamily(
                "echomq_rate_limit_wait_seconds",
                "Seconds until the queue's spent rate window admits claims (0 = admits)",
                labels=queue,
            ),
            "cooling": GaugeMetricFamily(
                "echomq_lanes_cooling", "Lanes cooling now (lane.cool, Cool)", labels=queue
            ),
            "service_rate": GaugeMetricFamily(
                "echomq_service_rate",
                "Claims per second the engine measured lately (5 s time constant; every worker)",
                labels=queue,
            ),
        }
        lanes: dict[str, _Family] = {
            "lane_depth": GaugeMetricFamily("echomq_lane_depth", "Pending jobs", labels=lane),
            "lane_active": GaugeMetricFamily("echomq_lane_active", "Leased jobs", labels=lane),
            "lane_weight": GaugeMetricFamily("echomq_lane_weight", "Lane weight", labels=lane),
            "lane_limit": GaugeMetricFamily(
                "echomq_lane_limit", "Lane concurrency ceiling (0 = none)", labels=lane
            ),
            "lane_paused": GaugeMetricFamily("echomq_lane_paused", "1 when paused", labels=lane),
            "lane_rate_wait": GaugeMetricFamily(
                "echomq_lane_rate_wait_seconds",
                "Seconds until the lane's spent rate budget admits again (0 = admits)",
                labels=lane,
            ),
            "lane_cooling": GaugeMetricFamily(
                "echomq_lane_cooling_seconds",
                "Seconds the lane still cools (0 = not cooling)",
                labels=lane,
            ),
            "lane_eta": GaugeMetricFamily(
                "echomq_lane_eta_seconds",
                "Estimated wait of a job enqueued on the lane now (absent: paused, cooling, "
                "or no service measured)",
                labels=lane,
            ),
        }
        return families, lanes

    def _shard_families(self) -> dict[str, _Family]:
        """A sharded queue's shards, a family apart: the per-queue series stay the queue's
        totals, so ``sum by (queue)`` never counts a job twice."""
        shard = ["queue", "shard"]
        return {
            "jobs": GaugeMetricFamily(
                "echomq_shard_jobs",
                "Jobs on one shard of a sharded queue by state",
                labels=["queue", "shard", "state"],
            ),
            "lanes": GaugeMetricFamily(
                "echomq_shard_lanes", "Lanes holding pending jobs on the shard", labels=shard
            ),
            "weight": GaugeMetricFamily(
                "echomq_shard_active_weight",
                "The shard's active weight W_s: the weights on its most urgent band's ring "
                "(what workers share claims among shards by)",
                labels=shard,
            ),
            "service_rate": GaugeMetricFamily(
                "echomq_shard_service_rate",
                "Claims per second the shard served lately (5 s time constant; every worker)",
                labels=shard,
            ),
            "info": GaugeMetricFamily(
                "echomq_shard_info",
                "Where the shard lives: its hash tag and its primary (always 1)",
                labels=["queue", "shard", "tag", "primary"],
            ),
            "quota": GaugeMetricFamily(
                "echomq_shard_quota",
                "The shard's part of a queue-wide gate (gate: concurrency, leases at once; "
                "rate, claims per the budget's window); 0: it holds none now",
                labels=["queue", "shard", "gate"],
            ),
            "budget": GaugeMetricFamily(
                "echomq_shard_budget",
                "A sharded queue's queue-wide budget that its shards' quotas split "
                "(gate: concurrency or rate)",
                labels=["queue", "gate"],
            ),
        }


class Metrics:
    """The metrics of some queues on one registry; also a consumer ``observer``.

    ``registry``: yours, to share with your own counters (default: a fresh one, so nothing
    global). ``max_lanes``: lanes per queue given their own label, busiest first; the rest are
    summed under ``~other`` (Prometheus series must stay bounded even with a lane per user).
    Call :meth:`refresh` (or :meth:`render`) before collecting: the engine is read then.
    A sharded queue is given as itself (a ``ShardedQueue``; ``echomq.engine.open_queue``
    opens a queue by name as what it is): a plain ``Queue`` of its name is its shard 0 alone.
    """

    def __init__(
        self,
        queues: Sequence[Queue],
        *,
        registry: CollectorRegistry | None = None,
        max_lanes: int = 100,
        buckets: Sequence[float] = WAIT_BUCKETS,
    ) -> None:
        self.queues = list(queues)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.max_lanes = count(max_lanes, "max_lanes")
        self._engine = _EngineCollector(self.max_lanes)
        self.registry.register(self._engine)
        self.observations = Observations(buckets, self.max_lanes)
        self.registry.register(self.observations)

    # -- the engine ----------------------------------------------------------------------------

    async def refresh(self) -> list[QueueSnapshot]:
        """Read every queue now; the next collect reports what was read."""
        snapshots = await asyncio.gather(*(read_snapshot(q, dead=0) for q in self.queues))
        self._engine.snapshots = list(snapshots)
        return self._engine.snapshots

    async def render(self) -> bytes:
        """Refresh, then the registry in the Prometheus text format (:data:`CONTENT_TYPE`)."""
        await self.refresh()
        return generate_latest(self.registry)

    async def endpoint(self, request: Request) -> Response:
        """A Starlette endpoint: ``Route("/metrics", metrics.endpoint)``."""
        return Response(await self.render(), media_type=CONTENT_TYPE)

    # -- the consumer observer -----------------------------------------------------------------

    def claimed(self, queue: str, jobs: Sequence[Job], lease_ms: int) -> None:
        self.observations.claimed(queue, jobs, lease_ms)

    def settled(self, queue: str, job: Job, outcome: Outcome) -> None:
        self.observations.settled(queue, job, outcome)

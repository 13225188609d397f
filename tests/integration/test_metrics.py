"""/metrics against a real Valkey: the text parses with Prometheus's own parser, the per-queue
and per-lane series carry the engine's values, and consumers feed wait times and settles."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from echomq.consumers.consumer import Consumer, ConsumerOptions, Defer, Drop
from echomq.engine.queue import Item, Queue
from echomq.engine.results import Job
from echomq.engine.sharded import ShardedQueue
from echomq.metrics import OTHER_LANE, Metrics
from echomq.testing import claim_job


async def _scrape(metrics: Metrics) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """name of each sample -> its sorted labels -> value."""
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    text = (await metrics.render()).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            samples.setdefault(sample.name, {})[labels] = sample.value
    return samples


def _lane(queue: Queue, group: str, **extra: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"queue": queue.name, "lane": group, **extra}.items()))


async def test_scrape_has_per_queue_and_per_lane_series_with_engine_values(queue: Queue) -> None:
    await queue.enqueue_many([Item(n, lane="loud") for n in range(5)] + [Item(0, lane="calm")])
    await queue.lane("loud").weight(3)
    await queue.lane("loud").limit(4)
    await queue.lane("calm").pause()
    job = await claim_job(queue)  # from loud, the head of the ring
    samples = await _scrape(Metrics([queue]))
    q = (("queue", queue.name),)
    assert samples["echomq_jobs"][(*q, ("state", "pending"))] == 5
    assert samples["echomq_jobs"][(*q, ("state", "active"))] == 1
    assert samples["echomq_lanes"][q] == 2
    assert samples["echomq_ring_lanes"][q] == 1
    assert samples["echomq_completed_total"][q] == 0
    loud, calm = _lane(queue, "loud"), _lane(queue, "calm")
    assert samples["echomq_lane_depth"] == {loud: 4, calm: 1}
    assert samples["echomq_lane_active"] == {loud: 1, calm: 0}
    assert samples["echomq_lane_weight"] == {loud: 3, calm: 1}
    assert samples["echomq_lane_limit"] == {loud: 4, calm: 0}
    assert samples["echomq_lane_paused"] == {loud: 0, calm: 1}
    assert samples["echomq_lane_rate_wait_seconds"] == {loud: 0, calm: 0}
    assert samples["echomq_lane_cooling_seconds"] == {loud: 0, calm: 0}
    assert samples["echomq_lanes_cooling"][q] == 0
    await queue.complete(job)
    await queue.lane("calm").cool(60.0)
    after = await _scrape(Metrics([queue]))
    assert after["echomq_completed_total"][q] == 1
    assert after["echomq_lane_active"][loud] == 0
    assert after["echomq_lanes_cooling"][q] == 1
    assert 59 < after["echomq_lane_cooling_seconds"][calm] <= 60


async def test_lanes_past_max_lanes_are_summed_under_other(queue: Queue) -> None:
    await queue.enqueue_many(
        [Item(n, lane="a") for n in range(4)]
        + [Item(n, lane="b") for n in range(3)]
        + [Item(n, lane="c") for n in range(2)]
        + [Item(0, lane="d")]
    )
    samples = await _scrape(Metrics([queue], max_lanes=2))
    assert samples["echomq_lane_depth"] == {
        _lane(queue, "a"): 4,
        _lane(queue, "b"): 3,
        _lane(queue, OTHER_LANE): 3,
    }
    assert set(samples["echomq_lane_weight"]) == {_lane(queue, "a"), _lane(queue, "b")}


async def test_consumers_feed_wait_times_and_settles_per_lane(queue: Queue) -> None:
    metrics = Metrics([queue])
    seen: dict[str, int] = {}
    all_handled = asyncio.Event()

    async def handler(job: Job) -> None:
        seen[job.payload] = seen.get(job.payload, 0) + 1
        if sum(seen.values()) == 6:
            all_handled.set()
        if job.payload == "fail":
            raise ValueError("boom")
        if job.payload == "drop":
            raise Drop("no use")
        if job.payload == "defer" and seen["defer"] == 1:
            raise Defer(60)

    plan = [("ok", "a"), ("ok", "a"), ("fail", "b"), ("drop", "b"), ("defer", "c"), ("ok", "c")]
    await queue.enqueue_many([Item(payload, lane=group) for payload, group in plan])
    options = ConsumerOptions(max_attempts=2, beat=0.05, concurrency=4)
    consumer = Consumer(queue, handler, options, observer=metrics)
    running = asyncio.ensure_future(consumer.run())
    await asyncio.wait_for(all_handled.wait(), 30)
    consumer.stop()
    await running
    samples = await _scrape(metrics)
    waits = samples["echomq_wait_seconds_count"]
    assert waits == {_lane(queue, "a"): 2, _lane(queue, "b"): 2, _lane(queue, "c"): 2}
    # Every first-attempt wait is under the +Inf bucket and non-negative.
    assert samples["echomq_wait_seconds_sum"][_lane(queue, "a")] >= 0
    settled = samples["echomq_settled_total"]
    assert settled[_lane(queue, "a", outcome="completed")] == 2
    assert settled[_lane(queue, "b", outcome="retried")] == 1
    assert settled[_lane(queue, "b", outcome="dead")] == 1
    assert settled[_lane(queue, "c", outcome="deferred")] == 1
    assert settled[_lane(queue, "c", outcome="completed")] == 1


async def test_applications_register_their_own_counters_on_the_registry(queue: Queue) -> None:
    registry = CollectorRegistry()
    metrics = Metrics([queue], registry=registry)
    sends = Counter("app_sends", "Sends by outcome", ["outcome"], registry=metrics.registry)
    sends.labels("ok").inc(3)
    samples = await _scrape(metrics)
    assert samples["app_sends_total"][(("outcome", "ok"),)] == 3
    assert "echomq_jobs" in samples


def test_a_second_metrics_on_one_registry_is_refused_by_name() -> None:
    registry = CollectorRegistry()
    Metrics([], registry=registry)
    with pytest.raises(ValueError, match="echomq_"):
        Metrics([], registry=registry)


@pytest.mark.parametrize("queue_kind", ["sharded"], indirect=True)
async def test_a_sharded_queue_has_its_totals_and_a_family_per_shard(queue: ShardedQueue) -> None:
    """The per-queue series are the whole queue's; ``echomq_shard_*`` gives each shard's
    (label ``shard``: at most the shard count), summing to them."""
    placement = queue.placement_map
    lanes = [f"m{i}" for i in range(12)]
    # Two jobs a lane at least: the one leased below leaves its lane one pending, so every
    # lane still counts, whichever the stride picks.
    await queue.enqueue_many(
        Item(n, lane=lane) for i, lane in enumerate(lanes) for n in range(i + 2)
    )
    job = await claim_job(queue)
    await queue.concurrency(5)  # a queue-wide budget: its shards' quotas sum to it
    total = sum(i + 2 for i in range(12))
    samples = await _scrape(Metrics([queue]))
    q = (("queue", queue.name),)
    assert samples["echomq_jobs"][(*q, ("state", "pending"))] == total - 1
    shard_pending = {
        dict(labels)["shard"]: value
        for labels, value in samples["echomq_shard_jobs"].items()
        if dict(labels)["state"] == "pending"
    }
    assert set(shard_pending) == {"0", "1", "2"}
    for k in range(3):
        mine = sum(i + 2 for i, lane in enumerate(lanes) if placement.shard_of(lane) == k)
        leased_here = int(job.shard == k)
        assert shard_pending[str(k)] == mine - leased_here
        labels = (*q, ("shard", str(k)))
        assert samples["echomq_shard_jobs"][(*labels, ("state", "active"))] == leased_here
        assert samples["echomq_shard_lanes"][labels] == sum(
            1 for lane in lanes if placement.shard_of(lane) == k
        )
        info = (*labels, ("primary", queue.wire.options.address), ("tag", placement.tags[k]))
        assert samples["echomq_shard_info"][tuple(sorted(info))] == 1
    assert sum(shard_pending.values()) == samples["echomq_jobs"][(*q, ("state", "pending"))]
    weights = samples["echomq_shard_active_weight"]
    assert sum(weights.values()) == samples["echomq_ring_lanes"][q]  # every lane at weight 1
    assert sum(samples["echomq_shard_service_rate"].values()) > 0
    assert samples["echomq_shard_budget"] == {(("gate", "concurrency"), *q): 5}
    quotas = samples["echomq_shard_quota"]
    assert {dict(labels)["gate"] for labels in quotas} == {"concurrency"}  # no rate budget
    assert sorted(dict(labels)["shard"] for labels in quotas) == ["0", "1", "2"]
    assert sum(quotas.values()) == 5

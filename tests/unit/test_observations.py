"""The consumer observer's store: waits land in the right buckets, lanes past the cap fold into
``~other``, and the text parses with Prometheus's own parser."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from echomq.engine.ids import Minter, unix_ms
from echomq.engine.results import Job
from echomq.errors import InvalidArgument
from echomq.ops.observations import OTHER_LANE, Observations, lane_label, lane_of_label

LEASE_MS = 30_000


def _job(group: str, waited_ms: int, attempts: int = 1) -> Job:
    job_id = Minter().mint("JOB")
    return Job(job_id, None, attempts, group, unix_ms(job_id) + waited_ms + LEASE_MS, "q")


def _samples(observations: Observations) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(observations)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_waits_land_in_cumulative_buckets_with_their_sum() -> None:
    observations = Observations([0.01, 0.1, 1.0], max_lanes=10)
    jobs = [_job("a", 5), _job("a", 10), _job("a", 50), _job("a", 2000), _job("a", -3)]
    observations.claimed("q", jobs, LEASE_MS)
    observations.claimed("q", [_job("a", 70_000, attempts=2)], LEASE_MS)  # a retry: skipped
    samples = _samples(observations)

    def bucket(le: str) -> float:
        labels = tuple(sorted({"le": le, "lane": "a", "queue": "q"}.items()))
        return samples[("echomq_wait_seconds_bucket", labels)]

    # 10 ms is inside the 0.01 bucket (le is inclusive); a clock skew below 0 counts as 0.
    assert [bucket(le) for le in ("0.01", "0.1", "1.0", "+Inf")] == [3, 4, 4, 5]
    lane = (("lane", "a"), ("queue", "q"))
    assert samples[("echomq_wait_seconds_count", lane)] == 5
    assert samples[("echomq_wait_seconds_sum", lane)] == pytest.approx(2.065)


def test_lanes_past_the_cap_fold_into_other() -> None:
    observations = Observations([1.0], max_lanes=2)
    observations.claimed("q", [_job(g, 1) for g in ("a", "b", "c", "d")], LEASE_MS)
    for group in ("a", "c", "d"):
        observations.settled("q", _job(group, 1), "completed")
    samples = _samples(observations)
    counts = {
        dict(labels)["lane"]: value
        for (name, labels), value in samples.items()
        if name == "echomq_wait_seconds_count"
    }
    assert counts == {"a": 1, "b": 1, OTHER_LANE: 2}
    settled = {
        dict(labels)["lane"]: value
        for (name, labels), value in samples.items()
        if name == "echomq_settled_total"
    }
    assert settled == {"a": 1, OTHER_LANE: 2}


def test_any_lane_name_is_its_own_label_and_never_reads_as_other() -> None:
    names = ["~other", "~~x", "~", 'a"b\\c\nd', "billing+eu@acme.test", "🚀 x", "nul\x00"]
    observations = Observations([1.0], max_lanes=len(names))
    observations.claimed("q", [_job(g, 1) for g in [*names, "folded"]], LEASE_MS)
    samples = _samples(observations)  # through the text format and Prometheus's parser
    labels = [
        dict(labels)["lane"] for (name, labels), _ in samples.items() if name.endswith("_count")
    ]
    assert sorted(labels) == sorted([*map(lane_label, names), OTHER_LANE])
    assert lane_label("~other") == "~~other"
    assert sorted(map(lane_of_label, labels), key=str) == sorted([*names, None], key=str)


@pytest.mark.parametrize("buckets", [[], [0.0], [-1.0], [float("inf")], [float("nan")]])
def test_bad_buckets_are_refused(buckets: list[float]) -> None:
    with pytest.raises(InvalidArgument, match="buckets"):
        Observations(buckets, max_lanes=1)

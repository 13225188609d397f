"""What consumers report, kept in plain counters and turned into Prometheus families only when
scraped: the wait from a job's mint to its claim per lane, and settles per lane and outcome.

No locks and no label lookups on the consumer's path: one event loop feeds these, and a scrape
from another thread copies before it reads.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from echomq.engine import ids as _ids
from echomq.engine.results import Job
from echomq.errors import InvalidArgument

#: The label of every lane past ``max_lanes``. A lane may be named anything, so a lane's own
#: label is its name with one ``~`` more when the name starts with ``~`` (``lane_label``):
#: no lane's label is ever ``~other``, and ``lane_of_label`` gives the name back.
OTHER_LANE = "~other"


def lane_label(group: str) -> str:
    """The ``lane`` label value of ``group``: its name, or ``~`` + its name when it starts with
    ``~`` (so it never reads as ``OTHER_LANE``). Prometheus's text format escapes the rest."""
    return "~" + group if group.startswith("~") else group


def lane_of_label(label: str) -> str | None:
    """The lane a ``lane`` label value stands for; None for ``OTHER_LANE`` (many lanes)."""
    if label == OTHER_LANE:
        return None
    return label[1:] if label.startswith("~~") else label


_WAIT_HELP = "Seconds from a job's mint (its id) to its claim (server clock), first attempts"
_SETTLED_HELP = "Jobs settled by this process's consumers, by outcome"


class _Wait:
    """One lane's histogram: a count per bucket (the last is +Inf) and the sum."""

    __slots__ = ("counts", "total")

    def __init__(self, size: int) -> None:
        self.counts = [0] * size
        self.total = 0.0


class Observations(Collector):
    """The consumer observer's store, and the collector that reports it."""

    def __init__(self, buckets: Sequence[float], max_lanes: int) -> None:
        bounds = sorted(float(b) for b in buckets)
        if not bounds or any(not math.isfinite(b) or b <= 0 for b in bounds):
            raise InvalidArgument("buckets", buckets, "must be finite seconds > 0")
        self.bounds = tuple(bounds)
        self.max_lanes = max_lanes
        self._labelled: dict[str, set[str]] = {}  # lanes with their own label, per queue
        self._waits: dict[tuple[str, str], _Wait] = {}  # (queue, label) -> histogram
        self._wait_of: dict[tuple[str, str], _Wait] = {}  # (queue, group) -> the same, cached
        self._settles: dict[tuple[str, str, str], int] = {}  # (queue, label, outcome) -> count

    def _lane(self, queue: str, group: str) -> str:
        seen = self._labelled.setdefault(queue, set())
        if group in seen:
            return lane_label(group)
        if len(seen) < self.max_lanes:
            seen.add(group)
            return lane_label(group)
        return OTHER_LANE

    def _wait(self, queue: str, group: str) -> _Wait:
        label = self._lane(queue, group)
        wait = self._waits.get((queue, label))
        if wait is None:
            wait = self._waits[(queue, label)] = _Wait(len(self.bounds) + 1)
        if label != OTHER_LANE:  # lanes folded into ~other are not cached: there may be millions
            self._wait_of[(queue, group)] = wait
        return wait

    def claimed(self, queue: str, jobs: Sequence[Job], lease_ms: int) -> None:
        # Claim time on the server clock is the deadline minus the lease: no clock read here.
        # Later attempts are skipped: their mint time would count the earlier attempts too.
        bounds, cached = self.bounds, self._wait_of
        for job in jobs:
            if job.attempts != 1:
                continue
            wait = cached.get((queue, job.lane)) or self._wait(queue, job.lane)
            # A claimed id came from the engine, valid: decode without validating again.
            minted = (_ids._decode_payload(job.id[3:]) >> _ids.TS_SHIFT) + _ids.EPOCH_MS
            waited = job.deadline_ms - lease_ms - minted
            seconds = waited / 1000 if waited > 0 else 0.0
            wait.counts[bisect_left(bounds, seconds)] += 1
            wait.total += seconds

    def settled(self, queue: str, job: Job, outcome: str) -> None:
        key = (queue, self._lane(queue, job.lane), outcome)
        self._settles[key] = self._settles.get(key, 0) + 1

    # -- the collector -------------------------------------------------------------------------

    def describe(self) -> Iterable[Metric]:
        return self._families()

    def collect(self) -> Iterable[Metric]:
        histogram, settled = self._families()
        upper = [repr(b) for b in self.bounds] + ["+Inf"]
        for (queue, lane), wait in list(self._waits.items()):
            cumulative = list(itertools.accumulate(list(wait.counts)))
            histogram.add_metric(
                [queue, lane], list(zip(upper, cumulative, strict=True)), sum_value=wait.total
            )
        for (queue, lane, outcome), value in list(self._settles.items()):
            settled.add_metric([queue, lane, outcome], value)
        return [histogram, settled]

    def _families(self) -> tuple[HistogramMetricFamily, CounterMetricFamily]:
        return (
            HistogramMetricFamily("echomq_wait_seconds", _WAIT_HELP, labels=["queue", "lane"]),
            CounterMetricFamily(
                "echomq_settled", _SETTLED_HELP, labels=["queue", "lane", "outcome"]
            ),
        )

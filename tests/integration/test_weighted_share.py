"""SPEC §1.4 weights: lanes weighted 3:1 are served 3:1, and the light lane never starves."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from echomq.engine.queue import Item, Queue
from echomq.engine.results import Job
from echomq.engine.sharded import ShardedQueue

CLAIMS = 4000
CHUNK = 500


@pytest.fixture
async def queue(valkey_url: str, queue_name: str, queue_kind: str) -> AsyncIterator[Queue]:
    # ALSO_SHARDED (tests/conftest.py): 3 shards, their loads read at every claim.
    sharded = {"shards": 3, "refresh": 0.0} if queue_kind == "sharded" else {}
    opener = ShardedQueue.connect if sharded else Queue.connect
    q = await opener(valkey_url, queue_name, pool_size=1, events=False, **sharded)
    yield q
    await q.pause()
    await q.obliterate(force=True)
    await q.close()


async def serve(queue: Queue, weights: dict[str, int]) -> list[str]:
    """Weight the lanes, pre-load them, claim CLAIMS times; returns the lane of each claim."""
    total = sum(weights.values())
    for group, weight in weights.items():
        await queue.lane(group).weight(weight)
        # A tenth more than the lane's fair share, so no lane runs dry (checked below).
        backlog = CLAIMS * weight // total + CLAIMS // 10
        for start in range(0, backlog, CHUNK):
            items = [Item(n, lane=group) for n in range(start, min(start + CHUNK, backlog))]
            verdicts = await queue.enqueue_many(items)
            assert {v.kind for v in verdicts} == {"enqueued"}
    served = []
    for _ in range(CLAIMS):
        job = await queue.claim()
        assert isinstance(job, Job), f"expected a job, got {job!r}"
        served.append(job.lane)
    return served


async def assert_never_ran_dry(queue: Queue, groups: list[str]) -> None:
    """Both lanes held work throughout, so every claim was a free choice between them."""
    depths = {info.lane: info.depth for info in await queue.lanes(groups)}
    assert all(depth > 0 for depth in depths.values()), f"a lane ran dry: {depths}"


def longest_wait(served: list[str], group: str) -> int:
    """The most claims in a row that went to other lanes before ``group`` was served (again)."""
    longest = run = 0
    for lane in served:
        run = 0 if lane == group else run + 1
        longest = max(longest, run)
    return longest


async def test_weights_3_to_1_serve_the_lanes_3_to_1(queue: Queue) -> None:
    served = await serve(queue, {"heavy": 3, "light": 1})
    heavy, light = served.count("heavy"), served.count("light")
    assert heavy + light == CLAIMS
    assert heavy / light == pytest.approx(3, rel=0.03), f"heavy {heavy} : light {light}"
    await assert_never_ran_dry(queue, ["heavy", "light"])


async def test_light_lane_waits_at_most_three_claims_under_weights_3_to_1(queue: Queue) -> None:
    served = await serve(queue, {"heavy": 3, "light": 1})
    assert longest_wait(served, "light") <= 3
    assert longest_wait(served, "heavy") <= 1
    await assert_never_ran_dry(queue, ["heavy", "light"])


@pytest.mark.one_slot("the longest wait is one ring's bound; across shards the stride's is looser")
async def test_three_weighted_lanes_share_in_proportion_and_none_starves(queue: Queue) -> None:
    weights = {"a": 3, "b": 2, "c": 1}
    served = await serve(queue, weights)
    for group, weight in weights.items():
        share = served.count(group) / CLAIMS
        assert share == pytest.approx(weight / 6, rel=0.03), f"{group}: {share:.3f}"
        others = sum(w for g, w in weights.items() if g != group)
        assert longest_wait(served, group) <= others, group
    await assert_never_ran_dry(queue, list(weights))


async def _weigh_and_load(queue: Queue, jobs: int) -> None:
    for group, weight in {"heavy": 3, "light": 1}.items():
        await queue.lane(group).weight(weight)
        backlog = jobs * weight // 4 + jobs // 10
        for start in range(0, backlog, CHUNK):
            items = [Item(n, lane=group) for n in range(start, min(start + CHUNK, backlog))]
            assert {v.kind for v in await queue.enqueue_many(items)} == {"enqueued"}


def _runs(groups: list[str]) -> list[tuple[str, int]]:
    """Consecutive runs of one lane: [("heavy", 3), ("light", 1), …]."""
    runs: list[tuple[str, int]] = []
    for group in groups:
        if runs and runs[-1][0] == group:
            runs[-1] = (group, runs[-1][1] + 1)
        else:
            runs.append((group, 1))
    return runs


@pytest.mark.parametrize("batch", [1, 3, 10, 50])
async def test_weights_3_to_1_hold_under_batch_claims(
    queue: Queue, valkey_url: str, batch: int
) -> None:
    """A batch walks the ring as single claims do, taking what is left of each lane's turn,
    so claim_batch(n) leases exactly the lanes a run of claim() would, in the same order."""
    jobs = 2100  # a whole number of batches of 1, 3, 10 and 50
    await _weigh_and_load(queue, jobs)
    served: list[str] = []
    while len(served) < jobs:
        claimed = await queue.claim_batch(batch)
        assert isinstance(claimed, list), f"expected jobs, got {claimed!r}"
        assert len(claimed) == batch, "a batch is filled from the next lanes of the ring"
        served += [job.lane for job in claimed]
    for group, run in _runs(served):
        assert run <= (3 if group == "heavy" else 1), f"{group} served {run} in a row"
    heavy, light = served.count("heavy"), served.count("light")
    assert heavy / light == pytest.approx(3, rel=0.03), f"batch {batch}: {heavy} : {light}"
    await assert_never_ran_dry(queue, ["heavy", "light"])

    twin = await Queue.connect(valkey_url, queue.name + "-single", pool_size=1, events=False)
    try:
        await _weigh_and_load(twin, jobs)
        singles = []
        for _ in range(jobs):
            job = await twin.claim()
            assert isinstance(job, Job)
            singles.append(job.lane)
        assert served == singles, "claim_batch served other lanes than single claims would"
    finally:
        await twin.pause()
        await twin.obliterate(force=True)
        await twin.close()


async def test_a_lane_alone_on_the_ring_is_served_in_full_batches(queue: Queue) -> None:
    """Turns cap a batch only while another lane waits: alone, a lane's next turn starts at
    once, so a batch is capped by depth and headroom alone (the single-lane fast path)."""
    await queue.lane("solo").weight(2)
    await queue.enqueue_many([Item(n, lane="solo") for n in range(60)])
    claimed = await queue.claim_batch(50)
    assert isinstance(claimed, list)
    assert len(claimed) == 50

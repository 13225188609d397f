"""Flow control in the engine: queue and lane rate limits, global concurrency, token buckets."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from echomq.engine.buckets import Bucket, Buckets, Taken, Wait
from echomq.engine.queue import Item, Queue
from echomq.engine.results import Empty, Job, RateLimited
from echomq.errors import InvalidArgument
from echomq.testing import claim_job, wait_for_server_ms

LEASE = 60.0


def windows(stamps: list[int], window_ms: int, budget: int) -> list[int]:
    """Claims per fixed window, rebuilt the way the limiter opens them: a window starts at the
    first admitted claim after the previous one ended and lasts ``window_ms``.

    Stamps are whole ms, so a claim at exactly ``start + window_ms`` may belong to either
    window (the counter's expiry is checked against a clock frozen at script start): it goes
    to the old window while that has room, else it opens the next.
    """
    counts: list[int] = []
    start = None
    for stamp in sorted(stamps):
        boundary = start is not None and stamp == start + window_ms
        if start is None or stamp > start + window_ms or (boundary and counts[-1] >= budget):
            start = stamp
            counts.append(0)
        counts[-1] += 1
    return counts


async def test_queue_rate_limit_is_shared_by_concurrent_claimers(queue: Queue) -> None:
    for chunk in range(10):
        await queue.enqueue_many([Item(n) for n in range(chunk * 1000, chunk * 1000 + 1000)])
    await queue.rate_limit(50, 0.2)
    stamps: list[int] = []
    waits: list[float] = []
    stop_at = time.monotonic() + 3.0

    async def claimer() -> None:
        while time.monotonic() < stop_at:
            outcome = await queue.claim(LEASE)
            if isinstance(outcome, Job):
                stamps.append(outcome.deadline_ms - int(LEASE * 1000))
                await queue.complete(outcome)
            elif isinstance(outcome, RateLimited):
                assert 0 < outcome.wait <= 0.2
                waits.append(outcome.wait)
                await asyncio.sleep(outcome.wait)
            else:
                pytest.fail(f"unexpected {outcome!r} with 10 000 jobs waiting")

    await asyncio.gather(*(claimer() for _ in range(4)))
    per_window = windows(stamps, 200, 50)
    assert max(per_window) <= 50, per_window
    span_ms = max(stamps) - min(stamps)
    budget = 50 * (span_ms // 200 + 1)
    assert len(stamps) >= 0.9 * budget, (len(stamps), budget, per_window)
    assert waits, "the limiter never refused a claim"


async def test_rate_limit_can_be_changed_and_removed_at_run_time(queue: Queue) -> None:
    await queue.enqueue_many(list(range(10)))
    await queue.rate_limit(2, 60)
    assert isinstance(await queue.claim(LEASE), Job)
    assert isinstance(await queue.claim(LEASE), Job)
    limited = await queue.claim(LEASE)
    assert isinstance(limited, RateLimited)
    assert 59 < limited.wait <= 60
    assert 59 < await queue.rate_limit_ttl() <= 60
    await queue.rate_limit(3, 60)  # a higher max admits more at once: 2 made, 3 allowed
    assert await queue.rate_limit_ttl() == 0
    assert isinstance(await queue.claim(LEASE), Job)
    await queue.rate_limit(None)
    assert all([isinstance(await queue.claim(LEASE), Job) for _ in range(7)])


async def test_lane_rate_limit_benches_only_that_lane_until_its_window_ends(queue: Queue) -> None:
    await queue.lane("loud").rate(5, 0.1)
    await queue.enqueue_many([Item(n, lane="loud") for n in range(200)])
    await queue.enqueue_many([Item(n, lane=f"quiet{n % 9}") for n in range(90)])
    loud: list[int] = []
    served = Counter[str]()
    while True:
        outcome = await queue.claim(LEASE)
        if not isinstance(outcome, Job):
            break
        served[outcome.lane] += 1
        if outcome.lane == "loud":
            loud.append(outcome.deadline_ms - int(LEASE * 1000))
        await queue.complete(outcome)
    # The quiet lanes drained completely while loud waited for its windows.
    assert all(served[f"quiet{n}"] == 10 for n in range(9)), served
    assert max(windows(loud, 100, 5)) <= 5
    # Loud spent its budget and sits benched off the ring; claims answer when it returns.
    assert isinstance(outcome, Empty)
    assert outcome.retry_in is not None
    assert 0 < outcome.retry_in <= 0.1
    assert "loud" not in await queue.ring()
    due = int(await queue.wire.call("ZSCORE", queue.keys.root + "rdue", "loud"))
    wakes = await queue.wire.call("LLEN", queue.keys.wake)
    await wait_for_server_ms(queue, due)
    # No claim while it waits: the beat's promote returns it to the ring, with a wake token.
    assert await queue.promote() == 0
    assert await queue.ring() == ["loud"]
    assert await queue.wire.call("LLEN", queue.keys.wake) >= min(64, wakes + 1)
    assert isinstance(await queue.claim(LEASE), Job)


async def test_claim_returns_a_benched_lane_to_the_ring_once_its_window_ends(
    queue: Queue,
) -> None:
    # A consumer kept busy by other lanes runs no upkeep: the claim itself must bring a lane
    # whose rate window ended back, or the lane waits for the next idle upkeep (10 s).
    await queue.lane("paced").rate(1, 0.2)
    await queue.enqueue_many([Item(n, lane="paced") for n in range(2)])
    await queue.enqueue_many([Item(n, lane="busy") for n in range(10)])
    first = await claim_job(queue, LEASE)
    assert first.lane == "paced"
    assert await queue.ring() == ["busy"]
    due = int(await queue.wire.call("ZSCORE", queue.keys.root + "rdue", "paced"))
    await wait_for_server_ms(queue, due)
    # No promote, no upkeep: only claims. The next two serve busy, then paced's second job.
    served = [(await claim_job(queue, LEASE)).lane for _ in range(2)]
    assert served == ["busy", "paced"]
    assert await queue.wire.call("ZSCORE", queue.keys.root + "rdue", "paced") is None


async def test_global_concurrency_ceiling_holds_until_a_complete(queue: Queue) -> None:
    await queue.enqueue_many([Item(n, lane=f"g{n % 3}") for n in range(9)])
    await queue.concurrency(2)
    first = await queue.claim(LEASE)
    second = await queue.claim_batch(5, LEASE)
    assert isinstance(first, Job)
    assert isinstance(second, list)
    assert len(second) == 1  # clamped to the one slot left
    assert await queue.claim(LEASE) == Empty()
    assert (await queue.counts()).active == 2
    await queue.complete(first)
    assert isinstance(await queue.claim(LEASE), Job)
    await queue.concurrency(None)
    assert isinstance(await queue.claim(LEASE), Job)


async def test_token_buckets_hold_rate_and_burst_under_concurrent_takers(
    valkey_url: str, queue: Queue, queue_name: str
) -> None:
    buckets = Buckets(queue.wire, queue_name)
    overall = Bucket("global", 30, 30)
    admitted: dict[str, list[int]] = {}
    refused_waits: list[float] = []
    stop_at = time.monotonic() + 5.0

    async def taker(worker: int) -> None:
        n = 0
        while time.monotonic() < stop_at:
            chat = f"chat{(worker * 1000 + n) % 97}"
            n += 1
            outcome = await buckets.take([overall, Bucket(chat, 1, 3)])
            if isinstance(outcome, Taken):
                admitted.setdefault(chat, []).append(outcome.at_ms)
            else:
                refused_waits.append(outcome.wait)
                await asyncio.sleep(min(outcome.wait, 0.05))

    await asyncio.gather(*(taker(w) for w in range(8)))
    assert refused_waits
    assert min(refused_waits) > 0  # a refusal always says how long
    every = sorted(t for stamps in admitted.values() for t in stamps)
    start = every[0]
    for k, stamp in enumerate(every, 1):  # never more than burst + rate·t, at any instant
        assert k <= 30 + 30 * (stamp - start) / 1000 + 1e-9
    for stamps in admitted.values():
        first = stamps[0]
        for k, stamp in enumerate(stamps, 1):
            assert k <= 3 + 1 * (stamp - first) / 1000 + 1e-9
    seconds = (every[-1] - start) / 1000
    long_run = (len(every) - 30) / seconds
    assert abs(long_run - 30) <= 0.03 * 30, long_run


async def test_token_bucket_wait_is_exact_and_take_after_it_succeeds(
    queue: Queue, queue_name: str
) -> None:
    buckets = Buckets(queue.wire, queue_name)
    bucket = Bucket("exact", 4, 2)
    assert isinstance(await buckets.take([bucket]), Taken)
    assert isinstance(await buckets.take([bucket]), Taken)
    refused = await buckets.take([bucket])
    assert isinstance(refused, Wait)
    assert 0 < refused.wait <= 0.25
    await wait_for_server_ms(queue, refused.at_ms + int(refused.wait * 1000))
    assert isinstance(await buckets.take([bucket]), Taken)


async def test_token_buckets_debit_all_or_none(queue: Queue, queue_name: str) -> None:
    buckets = Buckets(queue.wire, queue_name)
    roomy, tight = Bucket("roomy", 1, 10), Bucket("tight", 1, 1)
    assert isinstance(await buckets.take([roomy, tight]), Taken)
    assert isinstance(await buckets.take([roomy, tight]), Wait)  # tight is empty
    level = float(await queue.wire.call("HGET", buckets.key("roomy"), "tokens"))
    assert 8.9 < level < 9.5  # roomy paid once, not twice


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Bucket("b", 0, 1), "invalid rate 0"),
        (lambda: Bucket("b", -1, 1), "invalid rate -1"),
        (lambda: Bucket("b", 1, 0), "invalid burst 0"),
        (lambda: Bucket("", 1, 1), "invalid bucket name ''"),
    ],
)
def test_bad_bucket_is_refused(make: object, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        make()  # type: ignore[operator]


async def test_bad_limits_are_refused_and_write_nothing(queue: Queue) -> None:
    with pytest.raises(InvalidArgument, match="invalid window 0"):
        await queue.rate_limit(5, 0)
    with pytest.raises(InvalidArgument, match="invalid max 0"):
        await queue.rate_limit(0, 1)
    with pytest.raises(InvalidArgument, match="invalid ceiling 0"):
        await queue.concurrency(0)
    with pytest.raises(InvalidArgument, match="invalid window -1"):
        await queue.lane("a").rate(1, -1)
    with pytest.raises(InvalidArgument, match="invalid cost 5"):
        await Buckets(queue.wire, "t").take([Bucket("b", 1, 2)], cost=5)
    assert await queue.wire.call("EXISTS", queue.keys.meta, queue.keys.root + "grate") == 0

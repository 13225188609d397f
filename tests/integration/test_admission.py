"""Admission that says no, and says why, against a real Valkey (and a cluster): a lane's backlog
cap refuses an item whose lane holds that many unfinished jobs (pending, leased and scheduled),
per item and in input order inside ``enqueue_many``'s chunks, writing nothing for it; a single
enqueue raises ``LaneFull``. A duplicate says what the job it found was doing, read in the
same script call."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from echomq import (
    App,
    InvalidArgument,
    Item,
    LaneFull,
    Policy,
    Queue,
    SyncQueue,
    Verdict,
)
from echomq.testing import claim_job, discard, server_ms, wait_for_server_ms

HOUR = 3600.0


@pytest.fixture
async def kept(valkey_url: str, queue_name: str) -> AsyncIterator[Queue]:
    """A queue that keeps finished rows (completed, cancelled) for a minute."""
    q = await Queue.connect(valkey_url, queue_name, result_ttl=60)
    yield q
    await discard(q)


async def _absent(queue: Queue, verdict: Verdict) -> bool:
    """Nothing of a refused item was written: no row."""
    return await queue.state(verdict.id) == "absent"


# -- caps in a batch ----------------------------------------------------------------------------


async def test_enqueue_many_answers_enqueued_duplicate_and_rejected_in_input_order(
    queue: Queue,
) -> None:
    # --8<-- [start:caps]
    assert await queue.lane("acme").cap(3) is True
    first = await queue.enqueue("a0", lane="acme", dedup_key="report-1")
    items = [
        Item("a1", lane="acme"),
        Item("again", lane="acme", dedup_key="report-1"),  # a duplicate writes nothing: no cap
        Item("z1", lane="zen"),
        Item("a2", lane="acme"),
        Item("a3", lane="acme", dedup_key="report-3"),  # the fourth: refused
        Item("z2", lane="zen"),
        Item("a4", lane="acme", delay=HOUR),
    ]
    verdicts = await queue.enqueue_many(items)
    assert [v.kind for v in verdicts] == [
        "enqueued",
        "duplicate",
        "enqueued",
        "enqueued",
        "rejected",
        "enqueued",
        "rejected",
    ]
    assert (verdicts[1].id, verdicts[1].state) == (first.id, "pending")
    for refused in (verdicts[4], verdicts[6]):
        assert not refused.ok
        assert refused.reason == "lane full"
        assert isinstance(refused.error, LaneFull)
        assert (refused.error.lane, refused.error.cap, refused.error.backlog) == ("acme", 3, 3)
        assert await _absent(queue, refused)
    # --8<-- [end:caps]
    # The refused item's dedup key was not taken, nor its schedule entry written.
    assert await queue.wire.call("EXISTS", queue.keys.dedup("report-3")) == 0
    assert (await queue.counts()).scheduled == 0
    assert [(i.depth, i.backlog, i.cap) for i in await queue.lanes(["acme", "zen"])] == [
        (3, 3, 3),
        (2, 2, 0),
    ]


async def test_the_cap_holds_across_the_chunks_of_a_large_batch(queue: Queue) -> None:
    # 250 items go out as three script calls of up to 100 (ADMIT_CHUNK), in parallel on the
    # pool's connections: each chunk admits its items in input order, the chunks in any order.
    assert await queue.lane("bulk").cap(130)
    items = [Item(n, lane="bulk" if n % 5 else "other") for n in range(250)]
    verdicts = await queue.enqueue_many(items)
    kinds = [v.kind for v in verdicts]
    assert kinds.count("rejected") == 70
    for start in (0, 100, 200):
        chunk = [k for n, k in enumerate(kinds[start : start + 100], start) if n % 5]
        # Within a chunk the lane fills in input order: admitted items, then refused ones.
        assert chunk == sorted(chunk), chunk
    assert all(kinds[n] == "enqueued" for n in range(0, 250, 5))  # another lane: no cap
    assert (await queue.lane("bulk").info()).depth == 130


# -- caps one at a time -------------------------------------------------------------------------


async def test_a_single_enqueue_into_a_full_lane_raises_lane_full_and_writes_nothing(
    queue: Queue,
) -> None:
    await queue.lane("acme").cap(1)
    await queue.enqueue("first", lane="acme")
    before = await queue.wire.call("DBSIZE")
    for attempt in (
        lambda: queue.enqueue("x", lane="acme", id="JOB0KHTOWnGLuC", dedup_key="k"),
        lambda: queue.enqueue_in(HOUR, "x", lane="acme"),
        lambda: queue.enqueue_at(time.time() + HOUR, "x", lane="acme"),
    ):
        with pytest.raises(LaneFull) as refused:
            await attempt()
        assert (refused.value.lane, refused.value.cap, refused.value.reason) == (
            "acme",
            1,
            "lane full",
        )
    assert await queue.state("JOB0KHTOWnGLuC") == "absent"
    assert await queue.wire.call("DBSIZE") == before  # nothing written, not even a wake token


async def test_scheduled_jobs_count_toward_the_cap_until_they_leave_the_schedule(
    queue: Queue,
) -> None:
    await queue.lane("acme").cap(2)
    later = await queue.enqueue_in(HOUR, "later", lane="acme")
    soon = await queue.enqueue_in(0.001, "soon", lane="acme")
    info = await queue.lane("acme").info()
    assert (info.depth, info.scheduled, info.backlog) == (0, 2, 2)
    with pytest.raises(LaneFull):
        await queue.enqueue("now", lane="acme")
    # Promoted, `soon` is pending: still unfinished, still counted.
    await wait_for_server_ms(queue, await server_ms(queue) + 2)
    assert await queue.promote() == 1
    info = await queue.lane("acme").info()
    assert (info.depth, info.scheduled, info.backlog) == (1, 1, 2)
    with pytest.raises(LaneFull):
        await queue.enqueue("now", lane="acme")
    # A cancelled scheduled job leaves the schedule, and the count.
    assert (await queue.cancel(later.id)).was == "scheduled"
    assert (await queue.lane("acme").info()).scheduled == 0
    assert (await queue.enqueue("now", lane="acme")).kind == "enqueued"
    assert soon.kind == "scheduled"


async def test_retried_and_deferred_jobs_stay_counted_and_removed_or_drained_ones_do_not(
    queue: Queue,
) -> None:
    await queue.lane("acme").cap(3)
    for n in range(3):
        await queue.enqueue(n, lane="acme")
    retried, deferred = await claim_job(queue), await claim_job(queue)
    assert await queue.retry(retried, delay=HOUR, error="503") == "scheduled"
    assert await queue.delay(deferred, delay=HOUR) is True
    info = await queue.lane("acme").info()
    assert (info.depth, info.active, info.scheduled) == (1, 0, 2)
    with pytest.raises(LaneFull):
        await queue.enqueue("more", lane="acme")
    assert await queue.remove(retried.id) is True
    assert (await queue.lane("acme").info()).scheduled == 1
    assert await queue.drain(schedule=True) == 2
    assert await queue.wire.call("HGETALL", queue.keys.gscheduled) == {}
    assert [v.kind for v in await queue.enqueue_many([Item(n, lane="acme") for n in range(4)])] == [
        "enqueued",
        "enqueued",
        "enqueued",
        "rejected",
    ]


async def test_leased_jobs_count_and_the_cap_frees_as_jobs_finish(queue: Queue) -> None:
    await queue.lane("acme").cap(2)
    await queue.enqueue_many([Item(n, lane="acme") for n in range(2)])
    ok, bad = await claim_job(queue), await claim_job(queue)
    with pytest.raises(LaneFull):  # both leased: still the lane's unfinished work
        await queue.enqueue("more", lane="acme")
    assert await queue.complete(ok) is True
    assert (await queue.enqueue("more", lane="acme")).kind == "enqueued"
    with pytest.raises(LaneFull):
        await queue.enqueue("more", lane="acme")
    assert await queue.retry(bad, max_attempts=1, error="boom") == "dead"  # dead: finished
    assert (await queue.enqueue("more", lane="acme")).kind == "enqueued"


async def test_the_default_policy_caps_every_lane_not_named(queue: Queue) -> None:
    assert await queue.apply_policies(default=Policy(cap=1), vip=Policy(cap=3)) == 2
    assert await queue.apply_policies(default=Policy(cap=1), vip=Policy(cap=3)) == 0
    policies = await queue.policies()
    assert (policies.default.cap, policies.lanes["vip"].cap) == (1, 3)
    items = [Item(n, lane=lane) for lane in ("vip", "new-tenant") for n in range(4)]
    kinds = [v.kind for v in await queue.enqueue_many(items)]
    assert kinds == ["enqueued"] * 3 + ["rejected"] + ["enqueued"] + ["rejected"] * 3
    assert [i.cap for i in await queue.lanes(["vip", "new-tenant"])] == [3, 1]
    # A lane's own setter wins over the default; None gives the lane back to the default.
    assert await queue.lane("new-tenant").cap(2) is True
    assert await queue.lane("new-tenant").cap(2) is False  # in force already: nothing written
    assert (await queue.enqueue("x", lane="new-tenant")).kind == "enqueued"
    assert await queue.lane("new-tenant").cap(None) is True
    assert (await queue.lane("new-tenant").info()).cap == 1


async def test_a_bad_cap_is_refused_naming_it_before_any_write(queue: Queue) -> None:
    before = await queue.wire.call("DBSIZE")
    for bad in (0, -1, 10**9 + 1, "3", True, 2.5):
        with pytest.raises(InvalidArgument) as refused:
            await queue.lane("acme").cap(bad)  # type: ignore[arg-type]
        assert refused.value.argument == "cap"
        with pytest.raises(InvalidArgument, match="cap"):
            Policy(cap=bad)  # type: ignore[arg-type]
    assert await queue.wire.call("DBSIZE") == before


# -- why a duplicate ----------------------------------------------------------------------------


async def _pending(queue: Queue) -> str:
    return (await queue.enqueue("p")).id


async def _scheduled(queue: Queue) -> str:
    return (await queue.enqueue_in(HOUR, "s")).id


async def _active(queue: Queue) -> str:
    await queue.enqueue("a")
    return (await claim_job(queue)).id


async def _completed(queue: Queue) -> str:
    await queue.enqueue("c")
    job = await claim_job(queue)
    assert await queue.complete(job, result="done")
    return job.id


async def _dead(queue: Queue) -> str:
    await queue.enqueue("d")
    job = await claim_job(queue)
    assert await queue.retry(job, max_attempts=1, error="boom") == "dead"
    return job.id


async def _cancelled(queue: Queue) -> str:
    job_id = (await queue.enqueue("x")).id
    assert (await queue.cancel(job_id, "not needed")).was == "pending"
    return job_id


@pytest.mark.parametrize(
    ("state", "make"),
    [
        ("pending", _pending),
        ("scheduled", _scheduled),
        ("active", _active),
        ("completed", _completed),
        ("dead", _dead),
        ("cancelled", _cancelled),
    ],
)
async def test_a_duplicate_says_the_state_of_the_job_it_found(
    kept: Queue, state: str, make: Callable[[Queue], Awaitable[str]]
) -> None:
    job_id = await make(kept)
    single = await kept.enqueue("again", id=job_id)
    (batched,) = await kept.enqueue_many([Item("again", id=job_id)])
    for verdict in (single, batched):
        assert (verdict.kind, verdict.id, verdict.state) == ("duplicate", job_id, state)
        assert verdict.ok


async def test_a_duplicate_by_dedup_key_names_the_first_job_and_its_state(kept: Queue) -> None:
    # --8<-- [start:why]
    first = await kept.enqueue("r", dedup_key="report-7", dedup_ttl=HOUR)
    again = await kept.enqueue("r", dedup_key="report-7")
    assert (again.kind, again.id, again.state) == ("duplicate", first.id, "pending")
    assert (await kept.remove(first.id)) is True
    # The key outlived its row (a TTL of its own): the job is gone, and the verdict says so.
    gone = await kept.enqueue("r", dedup_key="report-7")
    assert (gone.kind, gone.id, gone.state) == ("duplicate", first.id, "absent")
    # --8<-- [end:why]
    fresh = await kept.enqueue("r")
    assert fresh.state is None  # only a duplicate carries a state


# -- the blocking producer -----------------------------------------------------------------------


@pytest.fixture
def sync_queue(valkey_url: str, queue: Queue) -> Iterator[SyncQueue]:
    q = SyncQueue.connect(valkey_url, queue.name)
    yield q
    q.close()


async def test_the_sync_producer_rejects_and_explains_as_the_async_one(
    queue: Queue, sync_queue: SyncQueue
) -> None:
    sync_queue.configure_lane("acme", cap=2)
    assert (await queue.lane("acme").info()).cap == 2
    first = sync_queue.enqueue("a", lane="acme")
    verdicts = sync_queue.enqueue_many(
        [Item("b", lane="acme"), Item("a", lane="acme", id=first.id), Item("c", lane="acme")]
    )
    assert [(v.kind, v.state) for v in verdicts] == [
        ("enqueued", None),
        ("duplicate", "pending"),
        ("rejected", None),
    ]
    assert verdicts[2].reason == "lane full"
    assert await _absent(queue, verdicts[2])
    with pytest.raises(LaneFull):
        sync_queue.enqueue_in(HOUR, "d", lane="acme")
    again = sync_queue.enqueue("a", id=first.id)
    assert (again.kind, again.state) == ("duplicate", "pending")


# -- the task layer ----------------------------------------------------------------------------


@pytest.fixture
async def app(valkey_url: str, queue_name: str) -> AsyncIterator[App]:
    app = App(valkey_url, queue=queue_name)
    app.lanes(default=Policy(cap=1))
    await app.connect()
    yield app
    await discard(app.queue())
    await app.close()


async def test_a_task_enqueue_raises_lane_full_and_a_batch_hands_back_rejected_handles(
    app: App,
) -> None:
    @app.task(lane="tenant", dedup="key")
    async def report(tenant: str, key: str) -> str:
        return key

    first = await report.enqueue("acme", "r1")
    assert first.duplicate_of is None
    with pytest.raises(LaneFull) as refused:
        await report.enqueue("acme", "r2")
    assert refused.value.lane == "acme"
    handles = await app.enqueue_many(
        [report.call("acme", "r1"), report.call("acme", "r3"), report.call("zen", "z1")]
    )
    assert [h.verdict.kind for h in handles] == ["duplicate", "rejected", "enqueued"]
    assert (handles[0].duplicate_of, handles[0].verdict.state) == (first.id, "pending")
    with pytest.raises(LaneFull):
        await handles[1].result(timeout=1)  # nothing was admitted: nothing to wait for
    again = report.enqueue_sync("acme", "r1")
    assert (again.duplicate_of, again.verdict.state) == (first.id, "pending")
    with pytest.raises(LaneFull):
        report.enqueue_sync("acme", "r4")

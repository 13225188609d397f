"""Batch tasks against a real Valkey: a batch fills to its size, or leaves at its wait with
fewer; waiting members join a batch parked on the wake list; one member's verdict settles that
member alone; a batch's leases are extended together; a failed or malformed batch retries all."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from echomq import (
    App,
    AppWorker,
    Batching,
    ConsumerOptions,
    Fixed,
    InvalidArgument,
    Item,
    Job,
    Member,
    TaskFailed,
    group,
)
from echomq.engine import Empty
from echomq.tasks import MemberVerdict

FAST = ConsumerOptions(beat=0.1, backoff=Fixed(0.0))


@dataclass(frozen=True)
class Row:
    key: int
    tenant: str


@pytest.fixture
async def app(valkey_url: str, queue_name: str) -> AsyncIterator[App]:
    app = App(valkey_url, queue=queue_name)
    await app.connect()
    yield app
    for name in list(app._queues):
        queue = app.queue(name)
        await queue.pause()
        await queue.obliterate(force=True)
    await app.close()


class Claims:
    """An AppWorker observer: sets ``first`` at the first claim."""

    def __init__(self) -> None:
        self.first = asyncio.Event()

    def claimed(self, queue: str, jobs: Any, lease_ms: int) -> None:
        self.first.set()

    def settled(self, queue: str, job: Job, outcome: Any) -> None:
        pass


async def test_a_batch_fills_to_its_max_size_across_lanes_without_waiting(app: App) -> None:
    batches: list[list[Member[Row]]] = []

    @app.task(batch=Batching(max_size=10, max_wait=30.0), lane=lambda item: item.tenant)
    async def insert(members: list[Member[Row]]) -> list[MemberVerdict[int]]:
        batches.append(members)
        return [m.done(m.item.key * 2) for m in members]

    handles = await app.enqueue_many(insert.call(Row(i, f"t{i % 2}")) for i in range(20))
    started = time.monotonic()
    tallies = await asyncio.wait_for(AppWorker(app, options=FAST).run_until_idle(), 20)
    assert time.monotonic() - started < 15  # two full batches: no 30 s wait for either
    assert [len(b) for b in batches] == [10, 10]
    assert tallies[app.default_queue].completed == 20
    first = batches[0]
    assert all(isinstance(m.item, Row) for m in first)  # rebuilt from the annotation
    assert {m.lane for m in first} == {"t0", "t1"}  # a batch mixes lanes
    assert sorted(m.id for b in batches for m in b) == sorted(h.id for h in handles)
    assert [await h.result(timeout=5) for h in handles] == [i * 2 for i in range(20)]


async def test_batches_by_lane_never_mix_lanes_and_take_turns(app: App) -> None:
    batches: list[list[Member[Row]]] = []

    shape = Batching(max_size=4, max_wait=30.0, by_lane=True)

    @app.task(batch=shape, lane=lambda item: item.tenant)
    async def insert(members: list[Member[Row]]) -> None:
        batches.append(members)

    await app.enqueue_many(insert.call(Row(i, f"t{i % 3}")) for i in range(18))
    started = time.monotonic()
    await asyncio.wait_for(AppWorker(app, options=FAST).run_until_idle(), 20)
    assert time.monotonic() - started < 15  # one claim a batch: no 30 s wait
    assert [len({m.lane for m in b}) for b in batches] == [1] * len(batches)
    assert sum(len(b) for b in batches) == 18
    first_round = [b[0].lane for b in batches[:3]]
    assert sorted(first_round) == ["t0", "t1", "t2"]  # the ring rotates between batches
    assert [len(b) for b in batches[:3]] == [4, 4, 4]


async def test_a_lane_batch_claim_keeps_ceilings_and_weights(app: App) -> None:
    queue = app.queue()
    for lane in ("a", "b"):
        await queue.enqueue_many([Item(n, lane=lane) for n in range(10)])
    await queue.lane("a").limit(3)
    await queue.lane("b").weight(2)
    batches = []
    for _ in range(3):
        jobs = await queue.claim_batch(8, one_lane=True)
        assert isinstance(jobs, list)
        batches.append(sorted({(j.lane, len(jobs)) for j in jobs}))
    # a (ceiling 3) gives 3; b (weight 2) two batches in its turn (8, then its last 2)
    assert batches == [[("a", 3)], [("b", 8)], [("b", 2)]]
    assert isinstance(await queue.claim_batch(8, one_lane=True), Empty)  # a: at its ceiling
    with pytest.raises(InvalidArgument) as refused:
        await queue.claim_batch(2, one_lane="yes")  # type: ignore[arg-type]
    assert refused.value.argument == "one_lane"
    with pytest.raises(InvalidArgument) as refused:
        Batching(max_size=2, max_wait=1.0, by_lane=1)  # type: ignore[arg-type]
    assert refused.value.argument == "by_lane"


async def test_a_batch_below_its_min_size_leaves_at_its_max_wait_with_fewer(app: App) -> None:
    ran: list[tuple[int, float]] = []

    @app.task(batch=Batching(max_size=10, min_size=5, max_wait=0.5))
    async def send(members: list[Member[str]]) -> None:
        ran.append((len(members), time.monotonic()))

    for word in ("a", "b", "c"):
        await send.enqueue(word)
    started = time.monotonic()
    await asyncio.wait_for(AppWorker(app, options=FAST).run_until_idle(), 20)
    [(size, at)] = ran
    assert size == 3
    assert 0.5 <= at - started < 10  # it waited out max_wait, then left with what it had


async def test_members_enqueued_while_a_batch_waits_join_it_by_the_wake_list(app: App) -> None:
    ran: list[tuple[list[str], float]] = []

    @app.task(batch=Batching(max_size=10, min_size=5, max_wait=30.0))
    async def send(members: list[Member[str]]) -> None:
        ran.append(([m.item for m in members], time.monotonic()))

    for word in ("a", "b", "c"):
        await send.enqueue(word)
    claims = Claims()
    worker = AppWorker(app, options=FAST, observer=claims)
    running = asyncio.ensure_future(worker.run_until_idle())
    await asyncio.wait_for(claims.first.wait(), 10)
    late = time.monotonic()
    await send.enqueue("d")
    await send.enqueue("e")
    await asyncio.wait_for(running, 20)
    [(words, at)] = ran
    assert sorted(words) == ["a", "b", "c", "d", "e"]  # at its min size: it left at once
    assert at - late < 15


async def test_one_members_verdict_settles_that_member_alone(app: App) -> None:
    batches: list[list[str]] = []

    @app.task(batch=Batching(max_size=10, min_size=1, max_wait=1.0), retries=2)
    async def deliver(members: list[Member[str]]) -> list[MemberVerdict[str]]:
        batches.append([m.item for m in members])
        verdicts: list[MemberVerdict[str]] = []
        for m in members:
            if m.item == "flaky" and m.attempts == 1:
                verdicts.append(m.retry(0.0, "try later"))
            elif m.item == "bad":
                verdicts.append(m.dead("no such address"))
            else:
                verdicts.append(m.done(f"sent {m.item} at {m.attempts}"))
        return verdicts[::-1]  # matched by member id, in any order

    ok, flaky, bad = [await deliver.enqueue(w) for w in ("ok", "flaky", "bad")]
    tallies = await asyncio.wait_for(AppWorker(app, options=FAST).run_until_idle(), 20)
    assert batches == [["ok", "flaky", "bad"], ["flaky"]]  # the retry ran alone
    assert await ok.result(timeout=5) == "sent ok at 1"
    assert await flaky.result(timeout=5) == "sent flaky at 2"
    with pytest.raises(TaskFailed) as failed:
        await bad.result(timeout=5)
    assert failed.value.error == "no such address"
    tally = tallies[app.default_queue]
    assert (tally.completed, tally.retried, tally.dead) == (2, 1, 1)


async def test_a_member_cancelled_while_its_batch_runs_is_not_retried(app: App) -> None:
    """Its verdict asks for a retry, but a cancel marked it meanwhile: the engine ends it
    cancelled, and the batch's tally says so (not a lost lease)."""
    handles: list[Any] = []

    @app.task(batch=Batching(max_size=2, min_size=2, max_wait=1.0), retries=3)
    async def deliver(members: list[Member[str]]) -> list[MemberVerdict[str]]:
        await handles[1].cancel("not wanted")  # the second member, while the batch runs
        return [m.done("sent") if m.item == "keep" else m.retry(0.0, "later") for m in members]

    handles.extend([await deliver.enqueue(w) for w in ("keep", "drop")])
    tallies = await asyncio.wait_for(AppWorker(app, options=FAST).run_until_idle(), 20)
    assert await handles[0].result(timeout=5) == "sent"
    info = await app.queue(app.default_queue).job(handles[1].id)
    assert info is not None
    assert info.state == "cancelled"
    tally = tallies[app.default_queue]
    assert (tally.completed, tally.cancelled, tally.retried, tally.lost) == (1, 1, 0, 0)


async def test_a_batchs_leases_are_extended_together_past_its_lease(app: App) -> None:
    queue = app.queue()
    extends: list[set[str]] = []
    extend_many = queue.extend_many

    async def counted(jobs: Iterable[Job | tuple[str, int]], *, lease: float) -> list[str]:
        jobs = list(jobs)
        extends.append({j.id if isinstance(j, Job) else j[0] for j in jobs})
        return await extend_many(jobs, lease=lease)

    queue.extend_many = counted  # type: ignore[method-assign]
    lease = 0.6
    deadlines: list[set[int]] = []

    @app.task(batch=Batching(max_size=4, max_wait=5.0))
    async def slow(members: list[Member[int]]) -> None:
        held = time.monotonic()
        while time.monotonic() - held < 3 * lease:  # the work, outliving its lease thrice
            pairs = await queue.wire.call("ZRANGE", queue.keys.active, 0, -1, "WITHSCORES")
            deadlines.append({int(float(score)) for _, score in pairs})  # RESP3: [id, score]
            await asyncio.sleep(0.05)

    handles = [await slow.enqueue(i) for i in range(4)]
    options = ConsumerOptions(beat=0.1, lease=lease, backoff=Fixed(0.0))
    tallies = await asyncio.wait_for(AppWorker(app, options=options).run_until_idle(), 20)
    ids = {h.id for h in handles}
    assert len(extends) >= 2
    assert all(called == ids for called in extends)
    assert all(len(seen) == 1 for seen in deadlines)  # one deadline shared by the batch
    assert len({next(iter(seen)) for seen in deadlines}) >= 3  # moved on, more than once
    tally = tallies[app.default_queue]
    assert (tally.completed, tally.lost, tally.retried) == (4, 0, 0)  # never reaped
    for h in handles:
        status = await h.status()
        assert status is not None
        assert status.attempts == 1


async def test_a_handler_exception_retries_every_member(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[list[int]] = []

    @app.task(batch=Batching(max_size=3, max_wait=1.0))
    async def flush(members: list[Member[int]]) -> None:
        calls.append([m.attempts for m in members])
        if len(calls) == 1:
            raise ConnectionError("database down")

    for i in range(3):
        await flush.enqueue(i)
    with caplog.at_level(logging.ERROR, "echomq.tasks"):
        await asyncio.wait_for(AppWorker(app, options=FAST).run_until_idle(), 20)
    assert calls == [[1, 1, 1], [2, 2, 2]]
    assert any("every member is retried" in r.getMessage() for r in caplog.records)


async def test_the_wrong_number_of_verdicts_retries_every_member_with_an_error_log(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    @app.task(batch=Batching(max_size=2, max_wait=1.0))
    async def flush(members: list[Member[int]]) -> list[MemberVerdict[None]] | None:
        calls.append(len(members))
        return [members[0].done()] if len(calls) == 1 else None

    first, second = await flush.enqueue(1), await flush.enqueue(2)
    with caplog.at_level(logging.ERROR, "echomq.tasks"):
        await asyncio.wait_for(AppWorker(app, options=FAST).run_until_idle(), 20)
    assert calls == [2, 2]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("returned 1 verdicts for 2 members" in e for e in errors)
    for handle in (first, second):
        status = await handle.status()
        assert status is not None
        assert (status.state, status.attempts) == ("completed", 2)


async def test_batches_run_side_by_side_up_to_their_concurrency(app: App) -> None:
    running: list[int] = []
    both = asyncio.Event()

    @app.task(batch=Batching(max_size=2, max_wait=1.0, concurrency=2))
    async def flush(members: list[Member[int]]) -> None:
        running.append(len(members))
        if len(running) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 10)  # the second batch runs while this one waits

    for i in range(4):
        await flush.enqueue(i)
    tallies = await asyncio.wait_for(AppWorker(app, options=FAST).run_until_idle(), 20)
    assert running == [2, 2]
    assert tallies[app.default_queue].completed == 4


async def test_a_worker_stopped_while_a_batch_waits_runs_what_it_holds(app: App) -> None:
    ran: list[int] = []

    @app.task(batch=Batching(max_size=10, max_wait=60.0))
    async def flush(members: list[Member[int]]) -> None:
        ran.append(len(members))

    await flush.enqueue(1)
    await flush.enqueue(2)
    claims = Claims()
    worker = AppWorker(app, options=FAST, observer=claims)
    running = asyncio.ensure_future(worker.run())
    await asyncio.wait_for(claims.first.wait(), 10)
    worker.stop()
    tallies = await asyncio.wait_for(running, 20)  # not the 60 s wait
    assert ran == [2]
    assert tallies[app.default_queue].completed == 2


async def test_a_batch_completing_flow_children_relays_to_their_parent_at_once(
    app: App, queue_name: str
) -> None:
    """A batch's completions leave entries in its queue's outbox for a parent on another queue:
    the batch worker relays them at its next turn, not at its idle upkeep (here 60 s)."""
    far = queue_name + "-far"

    @app.task(queue=far, batch=Batching(max_size=2, max_wait=0.05))
    async def double(members: list[Member[int]]) -> list[MemberVerdict[int]]:
        return [m.done(m.item * 2) for m in members]

    @app.task
    async def total(values: list[int]) -> int:
        return sum(values)

    handle = await group([double.call(1), double.call(2)], then=total).enqueue()
    parent = app.queue()
    options = ConsumerOptions(beat=0.1, idle_upkeep=60.0, backoff=Fixed(0.0))
    worker = AppWorker(app, queues=[far], options=options)  # the parent's queue is not served
    running = asyncio.ensure_future(worker.run())
    try:
        async with asyncio.timeout(20):  # far below the idle upkeep's 60 s
            while await parent.state(handle.id) != "pending":  # a release publishes no event
                await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await running
    assert (await parent.children(handle.id)).ordered() == [2, 4]

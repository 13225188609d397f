"""The batch-native engine: one script call per chunk of admissions and settles, each item
answered on its own, and a consumer that claims its free slots and coalesces its settles."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Sequence
from typing import Any

from echomq import Consumer, ConsumerOptions, Item, Job, Queue
from echomq.engine import Failed
from echomq.engine.transitions import ADMIT_CHUNK, SETTLE_CHUNK, Admission
from echomq.errors import KindError
from echomq.wire import Wire
from echomq.wire.connector import Arg, Command


class Counted:
    """The queue's real wire, counting the script calls that go through it by script name."""

    def __init__(self, wire: Wire, queue: Queue) -> None:
        self.wire = wire
        self.options = wire.options
        self.names = {script.sha: name for name, script in queue.scripts.scripts.items()}
        self.calls: Counter[str] = Counter()

    def _count(self, command: Sequence[Arg]) -> None:
        if command[0] == "EVALSHA":
            self.calls[self.names[str(command[1])]] += 1

    def call(self, *args: Arg) -> Awaitable[Any]:
        self._count(args)
        return self.wire.call(*args)

    def call_many(self, commands: Sequence[Command]) -> Awaitable[list[Any]]:
        for command in commands:
            self._count(command)
        return self.wire.call_many(commands)

    async def close(self) -> None:
        await self.wire.close()


async def counted(queue: Queue) -> tuple[Queue, Counted]:
    """A second handle on ``queue`` whose script calls are counted (every script loaded first,
    so no NOSCRIPT retry is counted twice)."""
    for script in queue.scripts.scripts.values():
        await queue.scripts.load(queue.wire, script)
    await queue.minter.ready()
    wire = Counted(queue.wire, queue)
    return Queue(queue.name, wire, minter=queue.minter, events=False), wire


async def test_enqueue_many_sends_one_script_call_per_chunk_and_answers_in_order(
    queue: Queue,
) -> None:
    handle, wire = await counted(queue)
    items = [Item(n, lane=f"g{n % 7}") for n in range(ADMIT_CHUNK * 2 + 5)]
    verdicts = await handle.enqueue_many(items)
    assert wire.calls["enqueue"] == 3
    assert [v.kind for v in verdicts] == ["enqueued"] * len(items)
    rows = [await queue.job(v.id) for v in verdicts]
    assert [(row.payload, row.lane) for row in rows if row] == [
        (n, f"g{n % 7}") for n in range(len(items))
    ]


async def test_a_chunk_refuses_a_bad_item_alone_and_writes_nothing_of_it(queue: Queue) -> None:
    await queue.minter.ready()
    good = [Admission(queue.minter.mint("JOB"), b"1", "a") for _ in range(2)]
    bad = Admission("ORD0KHTOWnGLuC", b"x", "a")
    replies = await queue.engine.enqueue([good[0], bad, good[1]])
    assert (replies[0], replies[2]) == ((1, good[0].id, ""), (1, good[1].id, ""))
    assert isinstance(replies[1], KindError)
    assert await queue.wire.call("EXISTS", queue.keys.job(bad.id)) == 0
    assert (await queue.counts()).pending == 2


async def test_a_duplicate_inside_one_chunk_is_answered_as_a_duplicate(queue: Queue) -> None:
    await queue.minter.ready()
    job_id = queue.minter.mint("JOB")
    verdicts = await queue.enqueue_many([Item(1, id=job_id), Item(2, id=job_id), Item(3)])
    assert [v.kind for v in verdicts] == ["enqueued", "duplicate", "enqueued"]
    info = await queue.job(job_id)
    assert info is not None
    assert info.payload == 1


async def test_complete_each_settles_a_batch_in_one_call_with_an_outcome_per_job(
    queue: Queue,
) -> None:
    await queue.enqueue_many(list(range(6)))
    jobs = await queue.claim_batch(6, lease=60)
    assert isinstance(jobs, list)
    assert len(jobs) == 6
    retried = jobs[1]
    assert await queue.retry(retried, delay=0, max_attempts=5) == "scheduled"
    stale = Job(jobs[2].id, None, jobs[2].attempts + 1, jobs[2].lane, 0)
    gone = Job(queue.minter.mint("JOB"), None, 1, "_", 0)
    handle, wire = await counted(queue)
    outcomes = await handle.complete_each([jobs[0], retried, stale, gone, jobs[3], jobs[3]])
    assert outcomes == ["completed", "settled", "stale", "gone", "completed", "gone"]
    assert wire.calls["complete"] == 1
    assert await queue.state(jobs[2].id) == "active"  # the stale settle changed nothing
    assert (await queue.counts()).completed == 2


async def test_retry_each_schedules_and_buries_each_job_by_its_own_budget(queue: Queue) -> None:
    await queue.enqueue_many(list(range(3)))
    jobs = await queue.claim_batch(3, lease=60)
    assert isinstance(jobs, list)
    failures = [
        Failed(jobs[0], "first", delay=60, max_attempts=3),
        Failed(jobs[1], "last", max_attempts=1),
        Failed(jobs[2], "again"),
    ]
    assert await queue.retry_each(failures) == ["scheduled", "dead", "scheduled"]
    states = [await queue.state(job.id) for job in jobs]
    assert states == ["scheduled", "dead", "pending"]
    dead = await queue.dead()
    assert [(d.id, d.last_error) for d in dead] == [(jobs[1].id, "last")]


async def test_settle_chunks_cover_a_batch_longer_than_one_chunk(queue: Queue) -> None:
    total = SETTLE_CHUNK + 20
    await queue.enqueue_many(list(range(total)))
    jobs: list[Job] = []
    while len(jobs) < total:
        batch = await queue.claim_batch(1000, lease=60)
        assert isinstance(batch, list)
        jobs += batch
    handle, wire = await counted(queue)
    assert await handle.complete_each(jobs) == ["completed"] * total
    assert wire.calls["complete"] == 2
    assert (await queue.counts()).active == 0


async def test_a_default_consumer_claims_its_free_slots_and_coalesces_its_settles(
    queue: Queue,
) -> None:
    total = 200
    await queue.enqueue_many([Item(n, lane=f"g{n % 4}") for n in range(total)])
    handle, wire = await counted(queue)
    done: list[int] = []
    finished = asyncio.Event()

    async def handler(job: Job) -> None:
        done.append(job.payload)
        if len(done) == total:
            finished.set()

    consumer = Consumer(handle, handler, ConsumerOptions(concurrency=20))
    running = asyncio.ensure_future(consumer.run())
    await asyncio.wait_for(finished.wait(), 30)
    consumer.stop()
    tally = await running
    assert sorted(done) == list(range(total))
    assert (tally.completed, tally.lost) == (total, 0)
    # 20 free slots per claim, one complete call per tick's worth of finished handlers.
    assert wire.calls["claim"] <= total // 10, wire.calls
    assert wire.calls["complete"] <= total // 10, wire.calls
    assert (await queue.counts()).completed == total

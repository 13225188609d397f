"""Ordered lanes (``Queue.ordered``) against a real Valkey: one job per lane at a time, served in
mint order, and a claimed job holds its lane through retries, defers and reaps until it ends."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from echomq import Consumer, ConsumerOptions, Defer, InvalidArgument, Job, Queue, Retry
from echomq.engine import Empty
from echomq.testing import claim_job, server_ms, wait_for_server_ms

HERE = Path(__file__).parent


async def enqueue_all(queue: Queue, items: list[tuple[str, str]]) -> dict[str, str]:
    """Enqueue (group, payload) pairs in order; payload -> job id."""
    ids: dict[str, str] = {}
    for group, payload in items:
        ids[payload] = (await queue.enqueue(payload, lane=group)).id
    return ids


async def test_an_ordered_lane_leases_one_job_at_a_time_in_mint_order(queue: Queue) -> None:
    await queue.ordered(True)
    await enqueue_all(queue, [("a", "a1"), ("a", "a2"), ("b", "b1"), ("a", "a3")])
    first, second = await claim_job(queue), await claim_job(queue)
    assert (first.payload, second.payload) == ("a1", "b1")
    assert await queue.claim() == Empty()  # a is held by a1, b has nothing more
    assert await queue.ring() == []
    assert await queue.complete(first)
    assert (await claim_job(queue)).payload == "a2"


async def test_an_unordered_queue_leases_a_lane_in_parallel(queue: Queue) -> None:
    await enqueue_all(queue, [("a", "a1"), ("a", "a2")])
    assert not await queue.is_ordered()
    jobs = [await claim_job(queue), await claim_job(queue)]
    assert [j.payload for j in jobs] == ["a1", "a2"]
    await queue.retry(jobs[0], delay=5.0, error="later")
    await queue.enqueue("a3", lane="a")
    assert (await claim_job(queue)).payload == "a3"  # nothing holds the lane


@pytest.mark.parametrize("how", ["retry", "defer"])
async def test_a_retried_or_deferred_head_holds_its_lane(queue: Queue, how: str) -> None:
    await queue.ordered(True)
    ids = await enqueue_all(queue, [("a", "a1"), ("a", "a2"), ("b", "b1")])
    head = await claim_job(queue)
    if how == "retry":
        assert await queue.retry(head, delay=0.05, error="flaky") == "scheduled"
    else:
        assert await queue.delay(head, delay=0.05)
    assert (await claim_job(queue)).payload == "b1"  # another lane is served meanwhile
    assert await queue.claim() == Empty()  # a2 waits behind its scheduled head
    await wait_for_server_ms(queue, await server_ms(queue) + 60)
    assert await queue.promote() == 1
    again = await claim_job(queue)
    assert (again.id, again.attempts) == (ids["a1"], 2)
    assert await queue.claim() == Empty()
    assert await queue.state(ids["a2"]) == "pending"
    await queue.complete(again)
    assert (await claim_job(queue)).id == ids["a2"]


async def test_a_reaped_head_goes_back_to_the_head_of_its_lane(queue: Queue) -> None:
    await queue.ordered(True)
    ids = await enqueue_all(queue, [("a", "a1"), ("a", "a2")])
    head = await claim_job(queue, lease=0.02)
    await wait_for_server_ms(queue, head.deadline_ms)
    assert (await queue.reap()).recovered == [ids["a1"]]
    again = await claim_job(queue)
    assert (again.id, again.attempts) == (ids["a1"], 2)
    assert await queue.claim() == Empty()


async def test_a_delayed_job_holds_nothing_until_due_then_goes_by_mint_order(
    queue: Queue,
) -> None:
    await queue.ordered(True)
    await queue.enqueue_in(30.0, "tomorrow", lane="a")
    delayed = await queue.enqueue_in(0.05, "soon", lane="a")
    ids = await enqueue_all(queue, [("a", "x1"), ("a", "x2")])
    head = await claim_job(queue)
    assert head.id == ids["x1"]  # the delayed jobs hold nothing
    await wait_for_server_ms(queue, await server_ms(queue) + 60)
    assert await queue.promote() == 1
    await queue.complete(head)
    assert (await claim_job(queue)).id == delayed.id  # minted before x2, both waiting


async def test_a_reaped_head_goes_before_an_older_job_that_came_due_meanwhile(
    queue: Queue,
) -> None:
    await queue.ordered(True)
    older = await queue.enqueue_in(0.05, "older", lane="a")
    await queue.enqueue("x", lane="a")
    head = await claim_job(queue, lease=0.02)
    assert head.payload == "x"
    await wait_for_server_ms(queue, await server_ms(queue) + 60)
    upkeep = await queue.upkeep()
    assert (upkeep.moved, upkeep.reaped.recovered) == (1, [head.id])
    again = await claim_job(queue)
    assert (again.id, again.attempts) == (head.id, 2)  # the holder first, then the older job
    await queue.complete(again)
    assert (await claim_job(queue)).id == older.id


async def test_a_dead_or_removed_head_frees_its_lane(queue: Queue) -> None:
    await queue.ordered(True)
    ids = await enqueue_all(queue, [("a", "a1"), ("a", "a2"), ("a", "a3")])
    assert await queue.retry(await claim_job(queue), max_attempts=1, error="boom") == "dead"
    second = await claim_job(queue)
    assert second.id == ids["a2"]
    await queue.retry(second, delay=30.0, error="much later")
    assert await queue.claim() == Empty()
    assert await queue.remove(ids["a2"])
    assert (await claim_job(queue)).id == ids["a3"]


async def test_switching_ordering_off_releases_held_lanes(queue: Queue) -> None:
    await queue.ordered(True)
    await enqueue_all(queue, [("a", "a1"), ("a", "a2")])
    await claim_job(queue)
    assert await queue.claim() == Empty()
    await queue.ordered(False)
    assert not await queue.is_ordered()
    assert (await claim_job(queue)).payload == "a2"


async def test_ordered_takes_a_bool(queue: Queue) -> None:
    with pytest.raises(InvalidArgument, match="on"):
        await queue.ordered(1)  # type: ignore[arg-type]
    assert not await queue.is_ordered()


async def test_three_consumers_complete_abcdabcd_in_order_per_lane(queue: Queue) -> None:
    """The issue's burst: eight replies ABCDABCD over two chats, three consumers, deferrals and
    retries on the way; each chat sees its replies in the order they were sent."""
    await queue.ordered(True)
    sent = [(f"chat-{i % 2}", f"{letter}{i}") for i, letter in enumerate("ABCDABCD")]
    await enqueue_all(queue, sent)
    done: dict[str, list[str]] = defaultdict(list)
    active: dict[str, int] = defaultdict(int)
    overlaps: list[str] = []
    finished = asyncio.Event()
    rng = random.Random(17)

    async def handler(job: Job) -> None:
        active[job.lane] += 1
        try:
            if active[job.lane] > 1:
                overlaps.append(job.payload)
            await asyncio.sleep(rng.uniform(0, 0.02))
            if job.attempts == 1 and job.payload[0] in "BC":
                raise Defer(0.02) if job.payload[0] == "B" else Retry(0.02)
            done[job.lane].append(job.payload)
            if sum(map(len, done.values())) == len(sent):
                finished.set()
        finally:
            active[job.lane] -= 1

    options = ConsumerOptions(beat=0.05, concurrency=3)
    consumers = [Consumer(queue, handler, options) for _ in range(3)]
    running = [asyncio.ensure_future(c.run()) for c in consumers]
    await asyncio.wait_for(finished.wait(), 20.0)
    for c in consumers:
        c.stop()
    await asyncio.gather(*running)
    assert overlaps == []
    for group in ("chat-0", "chat-1"):
        assert done[group] == [p for g, p in sent if g == group]


async def test_two_worker_processes_keep_each_lane_in_order(
    queue: Queue, valkey_url: str, tmp_path: Path
) -> None:
    """The setting lives in the engine: processes started without it read it back and obey."""
    await queue.ordered(True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    reader = await asyncio.create_subprocess_exec(
        sys.executable, "-c", READ_BACK, valkey_url, queue.name, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await reader.communicate()
    assert out.strip() == b"True"

    sent = [(f"l{i % 3}", f"{i}") for i in range(12)]
    await enqueue_all(queue, sent)
    log = tmp_path / "log"
    env["ECHOMQ_TEST_MARKER"] = str(log)
    command = [sys.executable, "-m", "echomq.cli", "--url", valkey_url, "worker",
               "worker_handlers:ordered_log", "--queue", queue.name, "--beat", "0.05",
               "--concurrency", "3"]  # fmt: skip
    workers = [await asyncio.create_subprocess_exec(*command, env=env) for _ in range(2)]
    try:
        deadline = asyncio.get_running_loop().time() + 30.0
        while (await queue.counts()).completed < len(sent):
            assert asyncio.get_running_loop().time() < deadline, "the workers never finished"
            await asyncio.sleep(0.05)  # another process's progress has no event to wait on
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            await asyncio.wait_for(worker.wait(), 20.0)
    lines = [line.split() for line in log.read_text().splitlines()]
    for group in ("l0", "l1", "l2"):
        mine = [(kind, n) for kind, g, n, _ in lines if g == group]
        expected = [p for g, p in sent if g == group]
        # start, end, start, end …: never two of a lane at once, and in the order sent.
        assert mine == [(kind, n) for n in expected for kind in ("start", "end")]


READ_BACK = """
import asyncio, sys
from echomq import Queue

async def main() -> None:
    async with await Queue.connect(sys.argv[1], sys.argv[2]) as queue:
        print(await queue.is_ordered())

asyncio.run(main())
"""

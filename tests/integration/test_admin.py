"""Admin verbs, the read plane, dedup keys and lease extension against a real Valkey."""

from __future__ import annotations

import asyncio

import pytest

from echomq.engine.queue import Item, Queue
from echomq.errors import InvalidArgument, StaleTokenError
from echomq.testing import claim_job, server_ms


async def test_dedup_key_maps_to_the_first_job_until_its_row_is_deleted(queue: Queue) -> None:
    first = await queue.enqueue("a", dedup_key="order-7")
    again = await queue.enqueue("b", dedup_key="order-7")
    assert (again.kind, again.id) == ("duplicate", first.id)
    job = await claim_job(queue)
    await queue.complete(job)
    third = await queue.enqueue("c", dedup_key="order-7")
    assert third.kind == "enqueued"
    assert third.id != first.id


async def test_dedup_ttl_bounds_the_mapping(queue: Queue) -> None:
    first = await queue.enqueue("a", dedup_key="k", dedup_ttl=0.05)
    ttl = await queue.wire.call("PTTL", queue.keys.dedup("k"))
    assert 0 < ttl <= 50
    deadline = await server_ms(queue) + ttl
    while await server_ms(queue) <= deadline:
        await asyncio.sleep(0.01)
    second = await queue.enqueue("b", dedup_key="k")
    assert second.kind == "enqueued"
    assert second.id != first.id


async def test_drain_of_one_lane_keeps_other_lanes_and_leased_jobs(queue: Queue) -> None:
    await queue.enqueue_many([Item(n, lane="a") for n in range(5)])
    await queue.enqueue_many([Item(n, lane="b") for n in range(3)])
    leased = await claim_job(queue)
    assert leased.lane == "a"
    assert await queue.lane("a").drain() == 4
    assert await queue.lane("a").depth() == 0
    assert await queue.lane("b").depth() == 3
    assert await queue.ring() == ["b"]
    assert await queue.state(leased.id) == "active"
    assert await queue.complete(leased)


async def test_drain_of_the_queue_runs_in_bounded_steps(queue: Queue) -> None:
    for start in range(0, 2500, 500):
        await queue.enqueue_many([Item(n, lane=f"g{n % 7}") for n in range(start, start + 500)])
    await queue.enqueue_in(60, "later")
    assert await queue.drain(schedule=True) == 2501
    counts = await queue.counts()
    assert (counts.pending, counts.scheduled, counts.lanes, counts.ringed) == (0, 0, 0, 0)


async def test_obliterate_deletes_every_key_in_bounded_steps(queue: Queue) -> None:
    for start in range(0, 2500, 500):
        await queue.enqueue_many([Item(n, lane=f"g{n % 3}") for n in range(start, start + 500)])
    await queue.lane("g1").limit(2)
    await queue.lane("g2").rate(10, 1)
    await claim_job(queue)
    await queue.pause()
    await queue.obliterate(force=True)
    leftover = await queue.wire.call("KEYS", queue.keys.root + "*")
    assert leftover == []


async def test_remove_takes_a_pending_job_out_of_its_lane_and_the_ring(queue: Queue) -> None:
    verdict = await queue.enqueue("x", lane="solo")
    assert await queue.ring() == ["solo"]
    assert await queue.remove(verdict.id) is True
    assert await queue.ring() == []
    assert await queue.state(verdict.id) == "absent"
    assert await queue.remove(verdict.id) is False


async def test_reassign_moves_a_pending_job_to_another_lane(queue: Queue) -> None:
    verdict = await queue.enqueue("urgent", lane="slow")
    assert await queue.reassign(verdict.id, "fast") is True
    assert await queue.ring() == ["fast"]
    job = await claim_job(queue)
    assert (job.id, job.lane) == (verdict.id, "fast")


async def test_reprocess_gives_a_dead_job_a_fresh_failure_budget(queue: Queue) -> None:
    verdict = await queue.enqueue("x", lane="g")
    job = await claim_job(queue)
    assert await queue.retry(job, max_attempts=1, error="bad") == "dead"
    assert [d.id for d in await queue.dead()] == [verdict.id]
    assert await queue.reprocess(verdict.id) is True
    info = await queue.job(verdict.id)
    assert info is not None
    assert (info.state, info.last_error) == ("pending", None)
    again = await claim_job(queue)
    assert again.attempts == 2  # the token never goes back
    assert await queue.retry(again, max_attempts=2, error="bad") == "scheduled"


async def test_delay_does_not_count_as_a_failure(queue: Queue) -> None:
    await queue.enqueue("x")
    job = await claim_job(queue)
    assert await queue.delay(job, delay=0.001)
    assert await queue.state(job.id) == "scheduled"
    due = int(await queue.wire.call("ZSCORE", queue.keys.schedule, job.id))
    while await server_ms(queue) <= due:
        await asyncio.sleep(0.002)
    assert await queue.promote() == 1
    again = await claim_job(queue)
    assert again.attempts == 2
    # One failure so far (the delay was grace): max_attempts=2 still schedules.
    assert await queue.retry(again, max_attempts=2) == "scheduled"


async def test_extend_pushes_the_lease_and_refuses_a_stale_token(queue: Queue) -> None:
    await queue.enqueue_many(["a", "b"])
    first = await claim_job(queue, lease=1)
    second = await claim_job(queue, lease=1)
    assert await queue.extend(first, lease=60)
    score = int(await queue.wire.call("ZSCORE", queue.keys.active, first.id))
    assert score - await server_ms(queue) > 59_000
    with pytest.raises(StaleTokenError, match="EMQSTALE extend"):
        await queue.extend(first.id, 7, lease=60)
    await queue.complete(second)
    failed = await queue.extend_many([first, (second.id, second.attempts)], lease=60)
    assert failed == [second.id]


async def test_read_plane_reports_counts_lanes_and_rows(queue: Queue) -> None:
    await queue.enqueue_many([Item(n, lane="a") for n in range(3)] + [Item(9, lane="b")])
    await queue.lane("a").limit(2)
    await queue.lane("a").weight(2)
    await queue.lane("b").pause()
    job = await claim_job(queue)
    counts = await queue.counts()
    assert (counts.pending, counts.active, counts.lanes, counts.ringed) == (3, 1, 2, 1)
    lanes = {lane.lane: lane for lane in await queue.lanes()}
    assert (lanes["a"].depth, lanes["a"].active, lanes["a"].limit, lanes["a"].weight) == (
        2,
        1,
        2,
        2,
    )
    assert lanes["b"].paused
    info = await queue.job(job.id)
    assert info is not None
    assert (info.state, info.attempts, info.lane, info.payload) == ("active", 1, "a", 0)
    assert await queue.job("JOB0000000000A") is None


async def test_a_worker_whose_lease_expired_cannot_settle_the_new_holders_job(
    queue: Queue,
) -> None:
    await queue.enqueue("x")
    slow = await claim_job(queue, lease=0.001)
    while await server_ms(queue) <= slow.deadline_ms:
        await asyncio.sleep(0.002)
    assert (await queue.reap()).recovered == [slow.id]
    fresh = await claim_job(queue)
    assert (fresh.id, fresh.attempts) == (slow.id, 2)
    with pytest.raises(StaleTokenError, match="token mismatch"):
        await queue.complete(slow)
    with pytest.raises(StaleTokenError):
        await queue.retry(slow, error="late")
    assert await queue.state(fresh.id) == "active"
    assert await queue.complete(fresh)


WORKER = """
import asyncio, os, signal, sys
from echomq import Queue
async def main():
    queue = await Queue.connect(sys.argv[1], sys.argv[2], pool_size=1)
    job = await queue.claim(lease=0.2)
    print(job.id, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # dies holding the lease
asyncio.run(main())
"""


async def test_a_killed_worker_loses_no_job(queue: Queue, valkey_url: str) -> None:
    import sys

    verdicts = await queue.enqueue_many(["a", "b"])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WORKER, valkey_url, queue.name, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert proc.returncode == -9
    held = out.decode().strip()
    assert held == verdicts[0].id
    assert await queue.state(held) == "active"
    deadline = int(await queue.wire.call("ZSCORE", queue.keys.active, held))
    while await server_ms(queue) <= deadline:
        await asyncio.sleep(0.01)
    assert (await queue.reap()).recovered == [held]
    served = [(await claim_job(queue)).id for _ in range(2)]
    assert sorted(served) == sorted(v.id for v in verdicts)


async def test_obliterate_keeps_to_its_budget_and_can_be_repeated(queue: Queue) -> None:
    verdicts = await queue.enqueue_many(list(range(7)))
    for _ in range(2):
        await claim_job(queue)  # two stay leased
    for _ in range(5):
        assert await queue.retry(await claim_job(queue), max_attempts=1) == "dead"
    await queue.pause()
    assert await queue.engine.obliterate(True, 2)  # more to do: only two rows went
    rows = [await queue.wire.call("EXISTS", queue.keys.job(v.id)) for v in verdicts]
    assert sum(rows) == 5
    await queue.obliterate(force=True)
    assert await queue.wire.call("KEYS", queue.keys.root + "*") == []
    await queue.obliterate(force=True)  # nothing left: a second call is not an error


async def test_a_lane_that_leaves_mid_turn_gets_a_full_turn_when_it_returns(queue: Queue) -> None:
    await queue.lane("a").weight(3)
    await queue.enqueue_many([Item(n, lane="a") for n in range(10)])
    await queue.enqueue_many([Item(n, lane="b") for n in range(10)])
    assert (await claim_job(queue)).lane == "a"  # one claim into a's turn of three
    await queue.lane("a").pause()
    assert (await claim_job(queue)).lane == "b"
    await queue.lane("a").resume()
    order = "".join([(await claim_job(queue)).lane for _ in range(8)])
    assert order == "baaabaaa"  # a's visits are whole turns of three again


async def test_has_work_sees_what_a_worker_can_still_get_to_and_nothing_else(
    queue: Queue,
) -> None:
    with pytest.raises(InvalidArgument, match="scheduled_within"):
        await queue.has_work(-1)
    assert not await queue.has_work()
    await queue.enqueue({"n": 1}, lane="a")
    assert await queue.has_work()
    await queue.lane("a").pause()  # paused work is no work for a --burst worker
    assert not await queue.has_work()
    await queue.lane("a").resume()
    await queue.pause()
    assert not await queue.has_work()
    await queue.resume()
    job = await claim_job(queue)
    await queue.lane("a").pause()  # the lane holds nothing more, but its job is leased
    assert await queue.has_work()
    await queue.complete(job)
    assert not await queue.has_work()
    await queue.enqueue_in(3600, {"n": 2}, lane="b")  # an hour away
    assert not await queue.has_work(scheduled_within=60)
    assert await queue.has_work(scheduled_within=7200)

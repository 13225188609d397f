"""One settle rule (docs/concepts/delivery.md, "Who may settle"): complete, retry, delay and
extend accept exactly the same holders. The fencing token decides: the claim that minted it may
settle while the job is leased, or reaped and not claimed since; after the next claim it is
stale."""

from __future__ import annotations

import asyncio

import pytest

from echomq import Job, Queue
from echomq.errors import StaleTokenError, StateError

SETTLES = ["complete", "retry", "delay", "extend"]


async def _reaped(queue: Queue) -> Job:
    """A job whose 1 ms lease the reap took back: pending again, claimed by nobody since."""
    await queue.enqueue({"n": 1})
    job = await queue.claim(lease=0.001)
    assert isinstance(job, Job)
    while not (await queue.reap()).recovered:  # the lease ends on the server's clock
        await asyncio.sleep(0.002)
    info = await queue.job(job.id)
    assert info is not None
    assert (info.state, info.stalled) == ("pending", 1)
    return job


async def _settle(queue: Queue, verb: str, job: Job) -> object:
    if verb == "complete":
        return await queue.complete(job)
    if verb == "retry":
        return await queue.retry(job, delay=0, max_attempts=5, error="boom: KeyError('x')")
    if verb == "delay":
        return await queue.delay(job, delay=60)
    return await queue.extend(job, lease=60)


@pytest.mark.parametrize("verb", SETTLES)
async def test_a_holder_reaped_but_not_reclaimed_may_settle(queue: Queue, verb: str) -> None:
    job = await _reaped(queue)
    outcome = await _settle(queue, verb, job)
    info = await queue.job(job.id)
    if verb == "complete":
        assert (outcome, info) == (True, None)
        assert (await queue.counts()).pending == 0
        return
    assert info is not None
    # The holder was alive: the stall the reap counted is taken back.
    assert info.stalled == 0
    if verb == "retry":
        assert outcome == "scheduled"
        assert (info.state, info.last_error) == ("pending", "boom: KeyError('x')")
    elif verb == "delay":
        assert (outcome, info.state) == (True, "scheduled")
    else:  # extend leases it back to its holder: out of its lane, in flight again
        assert (outcome, info.state) == (True, "active")
        assert await queue.lane("_").depth() == 0
        assert (await queue.lane("_").info()).active == 1
        assert await queue.complete(job) is True


@pytest.mark.parametrize("verb", SETTLES)
async def test_the_next_claim_makes_a_reaped_holder_stale(queue: Queue, verb: str) -> None:
    job = await _reaped(queue)
    again = await queue.claim(lease=60)
    assert isinstance(again, Job)
    assert (again.id, again.attempts) == (job.id, 2)
    if verb == "extend":
        assert await queue.extend_many([job], lease=60) == [job.id]
        with pytest.raises(StaleTokenError):
            await queue.extend(job, lease=60)
    else:
        with pytest.raises(StaleTokenError):
            await _settle(queue, verb, job)
    assert await queue.complete(again) is True


@pytest.mark.parametrize("verb", ["complete", "retry", "delay"])
async def test_a_claim_settles_once(queue: Queue, verb: str) -> None:
    """After a retry the token still matches the row, but the claim let the job go."""
    await queue.enqueue({"n": 1})
    job = await queue.claim(lease=60)
    assert isinstance(job, Job)
    assert await queue.retry(job, delay=0, max_attempts=5, error="first") == "scheduled"
    with pytest.raises(StateError, match="settled the job already"):
        await _settle(queue, verb, job)
    assert await queue.extend(job, lease=60) is False
    info = await queue.job(job.id)
    assert info is not None
    assert (info.state, info.last_error) == ("pending", "first")


async def test_retrying_a_reaped_job_at_once_keeps_its_lanes_place_on_the_ring(
    queue: Queue,
) -> None:
    """The reaped job already waits in its lane: an immediate retry leaves it there, so its lane
    keeps its place instead of going round to the tail behind lanes that joined after it."""
    job = await _reaped(queue)  # lane "_": claimed (it left the ring), reaped (it is back)
    await queue.enqueue("b", lane="b")
    assert await queue.ring() == ["_", "b"]
    assert await queue.retry(job, delay=0, max_attempts=5, error="boom") == "scheduled"
    assert await queue.ring() == ["_", "b"]
    info = await queue.job(job.id)
    assert info is not None
    assert (info.state, info.last_error, info.stalled) == ("pending", "boom", 0)

"""SPEC §1.6: the acceptance scenarios, one test each, against a real Valkey."""

from __future__ import annotations

import asyncio

import pytest

from echomq.engine.backoff import Exponential
from echomq.engine.queue import Queue
from echomq.engine.results import Empty, Job
from echomq.engine.transitions import Admission
from echomq.errors import KindError, StaleTokenError
from echomq.testing import claim_job, server_ms, wait_for_server_ms
from echomq.wire.connector import Connector

# The engine's round trips and the event subscriber on asyncio's event loop and on uvloop's
# (tests/conftest.py).
pytestmark = pytest.mark.every_loop


async def test_mint(queue: Queue) -> None:
    verdict = await queue.enqueue("cargo")
    assert verdict.kind == "enqueued"
    row = await queue.wire.call("HGETALL", queue.keys.job(verdict.id))
    assert row == {b"state": b"pending", b"attempts": b"0", b"payload": b'"cargo"', b"group": b"_"}


async def test_duplicate(queue: Queue) -> None:
    first = await queue.enqueue("first")
    again = await queue.enqueue("second", id=first.id)
    assert (again.kind, again.id, again.ok) == ("duplicate", first.id, True)
    info = await queue.job(first.id)
    assert info is not None
    assert info.payload == "first"
    assert (await queue.counts()).pending == 1


async def test_kind(queue: Queue) -> None:
    with pytest.raises(ValueError, match="namespace 'ORD' is not the required 'JOB'"):
        await queue.enqueue("x", id="ORD0KHTOWnGLuC")
    # The engine refuses on its own too, whatever a client sends.
    with pytest.raises(KindError, match="EMQKIND job id must be JOB-namespaced"):
        await queue.engine.enqueue_one(Admission("ORD0KHTOWnGLuC", b"x", "_"))
    assert await queue.wire.call("EXISTS", queue.keys.job("ORD0KHTOWnGLuC")) == 0


async def test_order(queue: Queue) -> None:
    ids = [(await queue.enqueue(n, lane="a")).id for n in range(3)]
    newest_first = await queue.wire.call("ZRANGE", queue.keys.lane("a"), "+", "-", "BYLEX", "REV")
    assert [i.decode() for i in newest_first] == ids[::-1]
    assert [(await claim_job(queue)).id for _ in range(3)] == ids


async def test_claim(queue: Queue) -> None:
    await queue.enqueue("work")
    job = await claim_job(queue)
    assert (job.payload, job.attempts, job.lane) == ("work", 1, "_")
    assert await queue.state(job.id) == "active"


async def test_stale(queue: Queue) -> None:
    await queue.enqueue("work")
    await queue.wire.call("SCRIPT", "FLUSH")  # forces the load-and-retry path
    job = await claim_job(queue)
    with pytest.raises(StaleTokenError, match="EMQSTALE complete token mismatch"):
        await queue.complete(job.id, 99)
    assert await queue.state(job.id) == "active"
    assert await queue.complete(job.id, 1) is True


async def test_complete(queue: Queue) -> None:
    await queue.enqueue("work")
    job = await claim_job(queue)
    assert await queue.complete(job)
    assert await queue.wire.call("EXISTS", queue.keys.job(job.id)) == 0
    assert await queue.wire.call("ZCARD", queue.keys.active) == 0
    assert await queue.complete(job) is False  # gone: a second complete is not an error


async def test_retry(queue: Queue) -> None:
    await queue.enqueue("work")
    job = await claim_job(queue)
    assert await queue.retry(job, delay=0.01, max_attempts=3, error="boom") == "scheduled"
    info = await queue.job(job.id)
    assert info is not None
    assert (info.state, info.last_error) == ("scheduled", "boom")
    await wait_for_server_ms(queue, await server_ms(queue) + 10)
    assert await queue.promote() == 1
    again = await claim_job(queue)
    assert (again.id, again.attempts) == (job.id, 2)
    assert await queue.complete(again.id, 2)


async def test_dead(queue: Queue) -> None:
    await queue.enqueue("work")
    job = await claim_job(queue)
    assert await queue.retry(job, max_attempts=1, error="fatal") == "dead"
    info = await queue.job(job.id)
    assert info is not None
    assert (info.state, info.last_error) == ("dead", "fatal")
    assert await queue.wire.call("ZSCORE", queue.keys.dead, job.id) is not None
    assert (await queue.counts()).failed == 1


async def test_reap(queue: Queue) -> None:
    await queue.enqueue("work")
    job = await claim_job(queue, lease=0.03)
    await wait_for_server_ms(queue, job.deadline_ms)
    reaped = await queue.reap()
    assert reaped.recovered == [job.id]
    assert await queue.state(job.id) == "pending"
    assert (await claim_job(queue)).attempts == 2


async def test_reap_dead_letters_a_job_that_stalled_max_stalled_times(queue: Queue) -> None:
    await queue.enqueue("work")
    for stall in range(1, 4):
        job = await claim_job(queue, lease=0.001)
        await wait_for_server_ms(queue, job.deadline_ms)
        reaped = await queue.reap(max_stalled=3)
        assert (reaped.dead == [job.id]) is (stall == 3)
    info = await queue.job(job.id)
    assert info is not None
    assert (info.state, info.last_error, info.stalled) == ("dead", "stalled", 3)


async def test_rotate(queue: Queue) -> None:
    for group in ("a", "a", "b", "b"):
        await queue.enqueue(group, lane=group)
    assert [(await claim_job(queue)).lane for _ in range(4)] == ["a", "b", "a", "b"]


async def test_pause(queue: Queue) -> None:
    for group in ("a", "a", "b", "b"):
        await queue.enqueue(group, lane=group)
    await queue.lane("a").pause()
    assert [(await claim_job(queue)).lane for _ in range(2)] == ["b", "b"]
    assert await queue.claim() == Empty()
    assert await queue.lane("a").depth() == 2
    await queue.lane("a").resume()
    assert (await claim_job(queue)).lane == "a"


async def test_limit(queue: Queue) -> None:
    await queue.lane("a").limit(1)
    await queue.enqueue(1, lane="a")
    await queue.enqueue(2, lane="a")
    first = await claim_job(queue)
    assert first.payload == 1
    assert isinstance(await queue.claim(), Empty)
    await queue.complete(first)
    assert (await claim_job(queue)).payload == 2


async def test_schedule(queue: Queue) -> None:
    verdict = await queue.enqueue_in(0.03, "later", lane="a")
    assert verdict.kind == "scheduled"
    assert await queue.state(verdict.id) == "scheduled"
    assert isinstance(await queue.claim(), Empty)
    assert await queue.promote() == 0
    due = int(await queue.wire.call("ZSCORE", queue.keys.schedule, verdict.id))
    await wait_for_server_ms(queue, due)
    assert await queue.promote() == 1
    job = await claim_job(queue)
    assert (job.payload, job.attempts, job.lane) == ("later", 1, "a")  # back to its own lane


async def test_backoff(queue: Queue) -> None:
    policy = Exponential(0.001, 0.01)
    verdict = await queue.enqueue("poison")
    outcome = ""
    while outcome != "dead":
        await queue.promote()
        job = await queue.claim()
        if not isinstance(job, Job):
            await wait_for_server_ms(queue, await server_ms(queue) + 1)
            continue
        error = f"boom {job.attempts}"
        outcome = await queue.retry(
            job, delay=policy.delay(job.attempts), max_attempts=3, error=error
        )
    info = await queue.job(verdict.id)
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == ("dead", 3, "boom 3")
    assert await queue.wire.call("ZSCORE", queue.keys.dead, verdict.id) is not None


async def test_resubscribe(queue: Queue, valkey_url: str) -> None:
    async with queue.subscribe() as events:
        first = await queue.enqueue("before")
        assert (await asyncio.wait_for(events.get(), 5))["job"] == first.id
        client_id = await events.connector.call("CLIENT", "ID")
        generation = events.generation
        # On the subscriber's own node (on a cluster, the one owning the channel's slot).
        async with Connector(events.connector.options, version_fence=None) as admin:
            assert await admin.call("CLIENT", "KILL", "ID", client_id) == 1
        await events.wait_subscribed(after=generation)  # re-subscribed by itself
        second = await queue.enqueue("after")
        event = await asyncio.wait_for(events.get(), 5)
        assert (event["event"], event["job"]) == ("enqueued", second.id)


async def test_events_reach_a_subscriber_the_queue_does_not_know(
    queue: Queue, valkey_url: str
) -> None:
    # A dashboard in another process subscribes on its own; the queue notices it at its next
    # listener check (at most a second) and publishes from then on.
    async with (
        await Queue.connect(valkey_url, queue.name) as dashboard,
        dashboard.subscribe() as events,
    ):
        received: asyncio.Task[dict[str, object]] = asyncio.ensure_future(events.get())
        sent = []
        while not received.done():
            sent.append((await queue.enqueue("ping")).id)
            await asyncio.wait({received}, timeout=0.05)
            assert len(sent) < 100, "no event within 5 s"
        assert received.result()["job"] in sent


async def test_an_application_event_reaches_subscribers_and_bad_ids_are_refused(
    queue: Queue,
) -> None:
    job = (await queue.enqueue("x")).id
    with pytest.raises(ValueError, match="invalid job id 'nope'"):
        queue.publish("scored", "nope")
    async with queue.subscribe() as events:
        queue.publish("scored", job, percent=80)
        event = await asyncio.wait_for(events.get(), 5)
    assert event == {"event": "scored", "job": job, "percent": 80}

"""Cooling a lane against a real Valkey: ``lane.cool`` / ``uncool`` and a handler's ``Cool``
take one lane off the ring for every worker until a time, and bring it back unattended."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from echomq import (
    App,
    AppWorker,
    Consumer,
    ConsumerOptions,
    Cool,
    InvalidArgument,
    Item,
    Job,
    Queue,
    context,
)
from echomq.engine import Empty
from echomq.errors import StateError
from echomq.testing import claim_job, server_ms


async def claimed_groups(queue: Queue, n: int) -> list[str]:
    """The lanes of up to ``n`` single claims, until the first empty answer."""
    groups = []
    for _ in range(n):
        job = await queue.claim()
        if not isinstance(job, Job):
            break
        groups.append(job.lane)
    return groups


async def test_a_cooled_lane_leaves_the_ring_and_the_others_keep_being_served(
    queue: Queue,
) -> None:
    for group in ("hot", "calm", "hot", "calm"):
        await queue.enqueue(group, lane=group)
    before = await server_ms(queue)
    assert await queue.lane("hot").cool(30.0)
    assert await queue.ring() == ["calm"]
    info = await queue.lane("hot").info()
    assert info.cooling_until is not None
    assert before + 29_000 <= info.cooling_until * 1000 <= before + 31_000
    assert 29.0 < info.cooling <= 30.0
    assert (info.depth, info.paused) == (2, False)
    assert await claimed_groups(queue, 4) == ["calm", "calm"]
    # The batch claim walks the same ring: nothing of the cooled lane.
    await queue.enqueue("calm", lane="calm")
    assert [job.lane for job in await queue.claim_batch(10)] == ["calm"]
    empty = await queue.claim()
    assert isinstance(empty, Empty)
    assert empty.retry_in is not None
    assert empty.retry_in > 29.0  # when the lane returns
    assert (await queue.lane("calm").info()).cooling_until is None


async def test_cool_is_idempotent_never_shortens_and_uncool_ends_it_early(queue: Queue) -> None:
    lane = queue.lane("t")
    await queue.enqueue("x", lane="t")
    assert await lane.cool(60.0)
    assert not await lane.cool(5.0)  # a shorter cool leaves the longer one in force
    assert (await lane.info()).cooling > 50.0
    assert await lane.cool(120.0)  # a longer one moves it on
    assert isinstance(await queue.claim(), Empty)
    assert await lane.uncool()
    assert not await lane.uncool()
    assert (await lane.info()).cooling_until is None
    assert (await claim_job(queue)).lane == "t"


async def test_the_admin_plane_cools_reads_and_uncools_a_lane(queue: Queue) -> None:
    """The guide's block (docs/guides/priorities-costs-cooling.md, "From the admin plane")."""
    await queue.enqueue("x", lane="acme")
    # --8<-- [start:admin]
    lane = queue.lane("acme")
    assert await lane.cool(30.0)  # or lane.cool(until=time.time() + 30)
    info = await lane.info()  # info.cooling: seconds left; info.cooling_until: when it ends
    assert 29 < info.cooling <= 30
    assert info.cooling_until is not None
    assert await lane.uncool()  # ended now; False when it was not cooling
    # --8<-- [end:admin]
    assert (await claim_job(queue)).lane == "acme"


async def test_a_paused_lane_that_cools_stays_paused_after_the_cool_ends(queue: Queue) -> None:
    lane = queue.lane("t")
    await queue.enqueue("x", lane="t")
    assert await lane.pause()
    assert await lane.cool(0.05)
    info = await lane.info()
    assert (info.paused, info.cooling > 0) == (True, True)
    empty = await queue.claim()
    assert isinstance(empty, Empty)
    assert empty.retry_in is not None
    await asyncio.sleep(empty.retry_in)  # the time under test: the cool's end
    await queue.upkeep()
    assert isinstance(await queue.claim(), Empty)
    info = await lane.info()
    assert (info.paused, info.cooling_until) == (True, None)
    assert await lane.resume()
    assert (await claim_job(queue)).lane == "t"


async def test_a_cool_composes_with_a_spent_rate_and_a_full_ceiling(queue: Queue) -> None:
    """A cooled lane keeps its rate and ceiling state: ending the cool brings it back only when
    those allow, and a slot freed while it cools does not ring it."""
    await queue.enqueue_many([Item(n, lane="paced") for n in range(2)])
    await queue.enqueue_many([Item(n, lane="capped") for n in range(2)])
    await queue.lane("paced").rate(1, 60.0, mode="fixed")
    await queue.lane("capped").limit(1)
    held = [await claim_job(queue), await claim_job(queue)]  # one each: both lanes now off
    assert {job.lane for job in held} == {"paced", "capped"}
    assert await queue.lane("paced").cool(30.0)
    assert await queue.lane("capped").cool(30.0)
    for job in held:
        assert await queue.complete(job)  # the ceiling frees: still cooling, so not ringed
    assert await queue.ring() == []
    assert await queue.lane("paced").uncool()
    assert await queue.lane("capped").uncool()
    assert await queue.ring() == ["capped"]  # paced's window is still spent
    assert (await queue.lane("paced").info()).rate_wait > 50


async def test_resume_ends_a_cool_too(queue: Queue) -> None:
    lane = queue.lane("t")
    await queue.enqueue("x", lane="t")
    assert await lane.cool(60.0)
    assert await lane.resume()
    assert not await lane.resume()
    assert (await claim_job(queue)).lane == "t"


async def test_a_cool_ending_unattended_brings_the_lane_back_and_wakes_a_parked_consumer(
    queue: Queue,
) -> None:
    """Beats and idle upkeeps far longer than the test: only the cool's own end, learned from
    the engine, can wake the parked consumer; nobody calls uncool."""
    done: list[float] = []
    finished = asyncio.Event()

    async def handler(job: Job) -> None:
        done.append(time.monotonic())
        finished.set()

    options = ConsumerOptions(beat=30.0, idle_upkeep=30.0)
    consumer = Consumer(queue, handler, options)
    running = asyncio.ensure_future(consumer.run())
    try:
        await asyncio.sleep(0.1)  # parked on an empty queue
        cooled_at = time.monotonic()
        assert await queue.lane("t").cool(0.4)
        await queue.enqueue("x", lane="t")  # into the cooled lane: no wake token of its own
        await asyncio.wait_for(finished.wait(), 5.0)
    finally:
        consumer.stop()
        await running
    assert done[0] - cooled_at >= 0.39
    assert (await queue.lane("t").info()).cooling_until is None


async def test_cool_from_a_handler_cools_only_its_lane_and_spends_no_attempt(
    queue: Queue,
) -> None:
    """A 429 for one tenant: its job goes back without an attempt spent (max_attempts=1 would
    bury it otherwise), its lane waits out the time, the other tenant is served meanwhile."""
    seen: list[tuple[str, int, float]] = []
    finished = asyncio.Event()

    async def handler(job: Job) -> None:
        seen.append((job.lane, job.attempts, time.monotonic()))
        if job.payload == "first" and job.attempts == 1:
            raise Cool(0.5, "429: retry after 0.5 s")
        if len(seen) == 5:
            finished.set()

    await queue.enqueue("first", lane="limited")
    await queue.enqueue("second", lane="limited")
    for n in range(2):
        await queue.enqueue(n, lane="free")
    options = ConsumerOptions(beat=30.0, idle_upkeep=30.0, max_attempts=1, concurrency=1)
    consumer = Consumer(queue, handler, options)
    running = asyncio.ensure_future(consumer.run())
    try:
        await asyncio.wait_for(finished.wait(), 5.0)
    finally:
        consumer.stop()
        tally = await running
    cooled_at = seen[0][2]
    assert seen[0][:2] == ("limited", 1)
    assert [s[0] for s in seen[1:3]] == ["free", "free"]
    assert all(at - cooled_at < 0.4 for _, _, at in seen[1:3])  # served while it cooled
    # Back at its place, ahead of the lane's next job, after the cool.
    assert [s[:2] for s in seen[3:]] == [("limited", 2), ("limited", 1)]
    assert seen[3][2] - cooled_at >= 0.49
    assert (tally.cooled, tally.completed, tally.dead) == (1, 4, 0)
    assert (await queue.counts()).dead == 0


async def test_a_cooled_job_is_fenced_by_its_token(queue: Queue) -> None:
    await queue.enqueue("x", lane="t")
    job = await claim_job(queue)
    assert await queue.cool(job, after=60.0)
    with pytest.raises(StateError):
        await queue.cool(job, after=60.0)  # this claim settled it already
    info = await queue.job(job.id)
    assert info is not None
    assert (info.state, info.failures) == ("pending", 0)
    assert isinstance(await queue.claim(), Empty)
    assert await queue.lane("t").uncool()
    again = await claim_job(queue)
    assert (again.id, again.attempts) == (job.id, 2)


async def test_cool_in_an_ordered_lane_keeps_the_job_at_the_head(queue: Queue) -> None:
    await queue.ordered(True)
    for n in range(3):
        await queue.enqueue(n, lane="t")
    job = await claim_job(queue)
    assert await queue.cool(job, after=60.0)
    assert await queue.lane("t").uncool()
    assert (await claim_job(queue)).id == job.id


async def test_a_cool_from_a_task_puts_it_back_and_returns_its_result(
    valkey_url: str, queue_name: str
) -> None:
    app = App(valkey_url, queue=queue_name)
    await app.connect()
    attempts: list[int] = []
    try:

        @app.task(retries=0)
        async def call_upstream(tenant: str) -> str:
            attempts.append(context().attempt)
            if len(attempts) == 1:
                raise Cool(0.05, "429")
            return f"sent for {tenant}"

        handle = await call_upstream.using(lane="acme").enqueue("acme")
        tallies = await AppWorker(app, options=ConsumerOptions(beat=0.1)).run_until_idle()
        assert await handle.result(timeout=5) == "sent for acme"
        assert tallies[queue_name].cooled == 1
        assert attempts == [1, 2]
    finally:
        await app.queue().pause()
        await app.queue().obliterate(force=True)
        await app.close()


async def test_cool_events_name_the_lane_and_when_it_returns(queue: Queue) -> None:
    async with queue.subscribe() as events:
        assert await queue.lane("t").cool(30.0)
        assert await queue.lane("t").uncool()
        first = await asyncio.wait_for(anext(aiter(events)), 5.0)
        second = await asyncio.wait_for(anext(aiter(events)), 5.0)
    assert (first["event"], first["group"], first["job"]) == ("cooling", "t", None)
    assert first["until"] > time.time() + 25
    assert (second["event"], second["group"]) == ("uncooled", "t")


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda lane: lane.cool(), "seconds"),
        (lambda lane: lane.cool(0), "seconds"),
        (lambda lane: lane.cool(-1.0), "seconds"),
        (lambda lane: lane.cool(math.nan), "seconds"),
        (lambda lane: lane.cool("5"), "seconds"),
        (lambda lane: lane.cool(20 * 365 * 86400.0), "seconds"),
        (lambda lane: lane.cool(1.0, until=time.time() + 5), "seconds"),
        (lambda lane: lane.cool(until=time.time() * 1000), "until"),
    ],
)
async def test_bad_cool_arguments_are_refused_naming_them(
    queue: Queue, call: object, argument: str
) -> None:
    lane = queue.lane("t")
    with pytest.raises(InvalidArgument) as refused:
        await call(lane)  # type: ignore[operator]
    assert refused.value.argument == argument
    assert (await lane.info()).cooling_until is None


@pytest.mark.parametrize(
    ("args", "kwargs", "argument"),
    [
        ((), {}, "after"),
        ((0,), {}, "after"),
        (("soon",), {}, "after"),
        ((), {"until": -1}, "until"),
    ],
)
def test_a_bad_cool_signal_is_refused_when_raised(
    args: tuple[object, ...], kwargs: dict[str, object], argument: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        Cool(*args, **kwargs)  # type: ignore[arg-type]
    assert refused.value.argument == argument

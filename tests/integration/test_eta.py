"""A tenant's position and ETA against a real Valkey: ``queue.position``, ``lane.eta()``,
``handle.position()`` and the sync twins; the model's bounds (share, rate, ceiling) and the
reasons a lane has no ETA (paused, cooling, idle); a steady flood within the documented error."""

from __future__ import annotations

import asyncio
import json
import statistics
import time

import pytest

from echomq import App, InvalidArgument, Item, Job, Queue, SyncQueue
from echomq.cli import main
from echomq.engine.snapshot import read_snapshot
from echomq.metrics import Metrics

#: The relative error the docs state for a steady flood (docs/guides/where-a-tenant-stands.md).
FLOOD_TOLERANCE = 0.35


async def test_position_is_the_jobs_rank_in_its_lane_and_the_turns_its_weight_needs(
    queue: Queue,
) -> None:
    ids = [(await queue.enqueue(n, lane="gold")).id for n in range(5)]
    await queue.enqueue("x", lane="free")
    await queue.lane("gold").weight(2)
    places = [await queue.position(i) for i in ids]
    assert [p.position if p else None for p in places] == [0, 1, 2, 3, 4]
    assert [p.turns if p else None for p in places] == [1, 1, 2, 2, 3]
    assert {p.lane if p else None for p in places} == {"gold"}
    assert (await queue.lane("gold").eta()).position == 5  # a job enqueued now: behind all
    # Claimed: it waits in no lane any more, and the others move up.
    job = await queue.claim()
    assert isinstance(job, Job)
    assert job.id == ids[0]
    assert await queue.position(ids[0]) is None
    after = await queue.position(ids[3])
    assert after is not None
    assert after.position == 2
    scheduled = await queue.enqueue_in(60.0, "later", lane="gold")
    assert await queue.position(scheduled.id) is None


async def test_a_lane_held_by_its_rate_waits_exactly_depth_over_rate(queue: Queue) -> None:
    await queue.lane("slow").rate(2, 1.0)
    ids = [(await queue.enqueue(n, lane="slow")).id for n in range(10)]
    for n in range(3):
        await queue.enqueue(n, lane="other")
    eta = await queue.lane("slow").eta()
    assert (eta.position, eta.seconds, eta.rate, eta.bound) == (10, 5.0, 2.0, "rate")
    fourth = await queue.position(ids[3])
    assert fourth is not None
    assert (fourth.seconds, fourth.bound) == (1.5, "rate")


async def test_a_lane_with_no_measured_service_and_no_cap_answers_idle(queue: Queue) -> None:
    await queue.enqueue("x", lane="a")
    await queue.enqueue("y", lane="a")
    eta = await queue.lane("a").eta()
    assert (eta.seconds, eta.rate, eta.bound, eta.service_rate) == (None, None, "idle", 0.0)
    empty = await queue.lane("nobody").eta()
    assert (empty.position, empty.seconds) == (0, 0.0)


async def test_paused_and_cooling_lanes_answer_no_eta_with_the_reason(queue: Queue) -> None:
    await queue.lane("p").rate(5, 1.0)
    await queue.lane("c").rate(5, 1.0)
    waiting = await queue.enqueue("x", lane="p")
    await queue.enqueue("y", lane="c")
    await queue.lane("p").pause()
    await queue.lane("c").cool(30.0)
    paused = await queue.position(waiting.id)
    assert paused is not None
    assert (paused.position, paused.seconds, paused.bound) == (0, None, "paused")
    cooling = await queue.lane("c").eta()
    assert (cooling.seconds, cooling.rate, cooling.bound) == (None, None, "cooling")
    etas = await queue.etas()
    assert (etas["p"].bound, etas["c"].bound) == ("paused", "cooling")
    await queue.lane("p").resume()
    assert (await queue.lane("p").eta()).bound == "rate"
    await queue.pause()
    assert (await queue.lane("p").eta()).bound == "paused"


async def test_measured_service_is_shared_by_weight_among_the_lanes_with_work(
    queue: Queue,
) -> None:
    for n in range(40):
        await queue.enqueue(n, lane="warm")
    for _ in range(40):
        job = await queue.claim()
        assert isinstance(job, Job)
        await queue.complete(job)
    for n in range(30):
        await queue.enqueue(n, lane="heavy")
        await queue.enqueue(n, lane="light")
    await queue.lane("heavy").weight(2)
    heavy, light = await queue.lane("heavy").eta(), await queue.lane("light").eta()
    # Each read decays the measured rate a little further: compare with its own.
    mu = heavy.service_rate
    assert mu > 0
    assert (heavy.bound, light.bound) == ("share", "share")
    assert heavy.rate == pytest.approx(mu * 2 / 3)
    assert light.rate == pytest.approx(light.service_rate / 3)
    # heavy drains its 30 at 2/3 of mu (light keeps 1/3 meanwhile): 45/mu; light then has
    # 15 left, served alone at mu: 60/mu.
    assert heavy.seconds == pytest.approx(45 / mu)
    assert light.seconds == pytest.approx(60 / light.service_rate)
    listing = await queue.etas()
    mu = listing["heavy"].service_rate
    assert listing["heavy"].seconds == pytest.approx(45 / mu)
    assert listing["light"].seconds == pytest.approx(60 / mu)


async def test_a_steady_flood_is_claimed_within_the_documented_error(queue: Queue) -> None:
    """Three lanes (weights 1 and 3, one held to 20/s) with a backlog each and steady arrivals,
    one consumer serving ~150 claims/s: sample jobs' predicted waits against their real ones."""
    await queue.lane("gold").weight(3)
    await queue.lane("capped").rate(20, 1.0)
    arrivals = {"free": 1, "gold": 3, "capped": 1}  # per 40 ms: ~125/s offered
    for lane in arrivals:
        await queue.enqueue_many([Item(n, lane=lane) for n in range(40)])
    claimed: dict[str, float] = {}
    stop = asyncio.Event()

    async def consume() -> None:
        while not stop.is_set():
            job = await queue.claim()
            if isinstance(job, Job):
                claimed[job.id] = time.monotonic()
                await queue.complete(job)
            await asyncio.sleep(0.005)  # the service of this flood: ~150 claims/s at most

    async def feed() -> None:
        while not stop.is_set():
            await queue.enqueue_many(
                [Item(lane, lane=lane) for lane, n in arrivals.items() for _ in range(n)]
            )
            await asyncio.sleep(0.04)

    tasks = [asyncio.create_task(consume()), asyncio.create_task(feed())]
    samples: dict[str, tuple[float, float]] = {}
    try:
        await asyncio.sleep(1.5)  # the flood settles and the claim rates are measured
        for n in range(8):
            verdict = await queue.enqueue("sample", lane=("free", "gold")[n % 2])
            at = time.monotonic()
            eta = await queue.position(verdict.id)
            if eta is not None and eta.seconds is not None:
                samples[verdict.id] = (eta.seconds, at)
            await asyncio.sleep(0.1)
        deadline = time.monotonic() + 10
        while not all(i in claimed for i in samples) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert len(samples) >= 6
    errors = sorted(
        abs(predicted - (claimed[id] - at)) / max(claimed[id] - at, 0.05)
        for id, (predicted, at) in samples.items()
    )
    assert statistics.median(errors) <= FLOOD_TOLERANCE, errors


async def test_handles_and_the_sync_queue_answer_the_same_place(
    valkey_url: str, queue_name: str
) -> None:
    app = App(valkey_url, queue=queue_name)
    await app.connect()

    @app.task(lane="tenant")
    async def work(tenant: str) -> None:
        return None

    try:
        first = await work.enqueue("acme")
        second = await work.enqueue("acme")
        place = await second.position()
        assert place is not None
        assert (place.lane, place.position) == ("acme", 1)
        with SyncQueue.connect(valkey_url, queue_name) as sync:
            twin = sync.position(second.id)
            assert twin is not None
            assert twin.position == 1
            assert sync.lane_eta("acme").position == 2
            with pytest.raises(InvalidArgument) as bad:
                sync.position("not-an-id")
            assert bad.value.argument == "job id"
        assert (await first.position()) is not None
    finally:
        queue = app.queue()
        await queue.pause()
        await queue.obliterate(force=True)
        await app.close()


async def test_bad_arguments_are_refused_naming_them(queue: Queue) -> None:
    with pytest.raises(InvalidArgument) as bad:
        await queue.position("not-an-id")
    assert bad.value.argument == "job id"
    with pytest.raises(InvalidArgument) as lane:
        queue.lane("")
    assert "lane" in lane.value.argument or "group" in lane.value.argument


async def test_the_cli_dashboard_snapshot_and_metrics_show_each_lanes_eta(
    queue: Queue, valkey_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def cli(*argv: str) -> str:
        capsys.readouterr()
        assert await asyncio.to_thread(main, ["--url", valkey_url, *argv]) == 0
        return capsys.readouterr().out

    await queue.lane("slow").rate(4, 1.0)
    await queue.enqueue_many([Item(n, lane="slow") for n in range(6)] + [Item(0, lane="held")])
    await queue.lane("held").pause()
    lanes = {lane["group"]: lane for lane in json.loads(await cli("--json", "lanes", queue.name))}
    assert lanes["slow"]["eta"] == {"position": 6, "seconds": 1.5, "rate": 4.0, "bound": "rate"}
    assert lanes["held"]["eta"]["bound"] == "paused"
    assert lanes["held"]["eta"]["seconds"] is None
    table = await cli("lanes", queue.name)
    assert "1.50s (rate)" in table
    assert "- (paused)" in table
    snap = (await read_snapshot(queue, dead=0)).as_json()  # what the dashboard serves
    shown = {lane["group"]: lane["eta"] for lane in snap["lanes"]}
    assert shown["slow"]["seconds"] == 1.5
    assert snap["service_rate"] == 0.0
    text = (await Metrics([queue]).render()).decode()
    assert f'echomq_lane_eta_seconds{{lane="slow",queue="{queue.name}"}} 1.5' in text
    assert 'echomq_lane_eta_seconds{lane="held"' not in text  # no estimate: no sample
    assert f'echomq_service_rate{{queue="{queue.name}"}} 0.0' in text

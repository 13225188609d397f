"""Periodic tasks against a real Valkey: three schedulers (three AppWorkers, three Apps) on one
1 s schedule enqueue each tick exactly once, and a restart of all of them follows each policy;
three ``echomq worker`` processes do too; an occurrence stays a duplicate after it completed;
colliding name hashes are told apart."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from echomq import App, AppWorker, ConsumerOptions, Queue, context
from echomq.engine.ids import unix_ms
from echomq.tasks import periodic
from echomq.tasks.periodic import occurrence_id
from echomq.tasks.scheduler import Scheduler
from echomq.testing import server_ms

FAST = ConsumerOptions(beat=0.1)
HERE = Path(__file__).resolve().parent
# The run is three processes on a 1 s schedule for 10 s (.ci/run:
# ECHOMQ_TEST_FULL_SCALE=1); `make test` watches the same processes for 3 s.
WINDOW = 10 if os.environ.get("ECHOMQ_TEST_FULL_SCALE") else 3


def scheduling_app(url: str, queue: str, seen: dict[str, list[str]]) -> App:
    """One process's App: a task per policy, each on a 1 s schedule."""
    app = App(url, queue=queue)
    for policy in ("skip", "once"):

        async def beat(policy: str = policy) -> None:
            seen[policy].append(context().job.id)

        task = app.task(name=f"beat-{policy}")(beat)
        app.periodic(every=1.0, name=f"beat-{policy}", missed=policy)(task)
    return app


async def at_ms_of_second(queue: Queue, offset: int) -> int:
    """Sleep until the server clock is ``offset`` ms into a second; that instant (Unix ms)."""
    now = await server_ms(queue)
    await asyncio.sleep(((offset - now % 1000) % 1000) / 1000)
    return await server_ms(queue)


async def run_workers(apps: list[App], until: Callable[[], Awaitable[int]]) -> int:
    workers = [AppWorker(app, options=FAST) for app in apps]
    runs = [asyncio.ensure_future(w.run()) for w in workers]
    stopped = await until()
    for worker in workers:
        worker.stop()
    await asyncio.gather(*runs)
    return stopped


async def test_three_schedulers_enqueue_each_tick_once_and_a_restart_follows_the_policy(
    valkey_url: str, queue_name: str
) -> None:
    seen: dict[str, list[str]] = {"skip": [], "once": []}
    apps = [scheduling_app(valkey_url, queue_name, seen) for _ in range(3)]
    queue = (await apps[0].connect()).queue()

    async def three_seconds_on() -> int:
        await asyncio.sleep(3.0)
        return await at_ms_of_second(queue, 500)  # half a second past a tick: it ran

    start = await at_ms_of_second(queue, 300)
    stop = await run_workers(apps, three_seconds_on)
    for app in apps[1:]:
        await app.close()  # those processes are gone: nothing schedules for ~3 s
    await asyncio.sleep(2.0)
    apps[1:] = [scheduling_app(valkey_url, queue_name, seen) for _ in range(2)]
    restart = await at_ms_of_second(queue, 300)
    end = await run_workers(apps, three_seconds_on)

    def ticks(first: int, last: int) -> list[int]:
        return list(range(first // 1000 * 1000 + 1000, last // 1000 * 1000 + 1, 1000))

    before, after = ticks(start, stop), ticks(restart, end)
    assert (len(before), len(after), len(ticks(stop, restart))) == (3, 3, 3)
    missed_once = restart // 1000 * 1000  # the latest tick missed in the downtime
    expected = {"skip": before + after, "once": [*before, missed_once, *after]}
    for policy, ids in seen.items():
        name = f"beat-{policy}"
        assert len(ids) == len(set(ids)), f"{name}: an occurrence ran twice"
        assert sorted(unix_ms(id) for id in ids) == expected[policy], name
        assert all(id == occurrence_id(name, unix_ms(id)) for id in ids), name
    assert int(await queue.wire.call("HGET", queue.keys.periodic, "beat-skip")) == after[-1]
    for app in apps[1:]:
        await app.close()
    await queue.pause()
    await queue.obliterate(force=True)
    assert not await queue.wire.call("EXISTS", queue.keys.periodic)
    await apps[0].close()


@pytest.mark.parametrize("result_ttl", [86_400.0, 0.0])
async def test_an_occurrence_is_a_duplicate_after_it_completed(
    valkey_url: str, queue_name: str, result_ttl: float
) -> None:
    app = App(valkey_url, queue=queue_name, result_ttl=result_ttl)

    @app.periodic(every=3_600.0, name="hourly", lane="reports")
    @app.task(lane_limit=1)
    async def hourly() -> str:
        return "ran"

    async with app:
        queue, (schedule,) = app.queue(), app.schedules.values()
        scheduler = Scheduler(app, [schedule])
        tick = schedule.at_or_before(await server_ms(queue))
        assert tick is not None
        first = await scheduler.enqueue(queue, schedule, tick)
        assert (first.kind, first.id) == ("enqueued", schedule.id_at(tick))
        assert (await scheduler.enqueue(queue, schedule, tick)).kind == "duplicate"
        info = await queue.job(first.id)
        assert info is not None
        assert info.lane == "reports"  # an ordinary job on its lane, with the lane's gates
        assert (await queue.lane("reports").info()).limit == 1
        await AppWorker(app, options=FAST).run_until_idle()  # the hourly tick is no pending work
        assert bool(await queue.job(first.id)) is (result_ttl > 0)
        again = await scheduler.enqueue(queue, schedule, tick)
        assert (again.kind, again.id) == ("duplicate", first.id)
        await queue.pause()
        await queue.obliterate(force=True)


async def test_schedules_whose_name_hashes_meet_get_an_occurrence_each(
    valkey_url: str, queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(periodic, "name_hash", lambda name: 2048)  # every name collides
    app = App(valkey_url, queue=queue_name)

    @app.periodic(every=60.0, name="a")
    @app.periodic(every=60.0, name="b")
    @app.task(name="job")
    async def job() -> None:
        return None

    async with app:
        queue, scheduler = app.queue(), Scheduler(app, list(app.schedules.values()))
        tick = 1_767_225_600_000
        a = await scheduler.enqueue(queue, app.schedules["a"], tick)
        b = await scheduler.enqueue(queue, app.schedules["b"], tick)
        assert (a.kind, b.kind) == ("enqueued", "enqueued")
        assert a.id == occurrence_id("a", tick) != b.id
        again = await scheduler.enqueue(queue, app.schedules["b"], tick)
        assert (again.kind, again.id) == ("duplicate", b.id)
        await queue.pause()
        await queue.obliterate(force=True)


async def test_three_worker_processes_enqueue_each_tick_once(
    valkey_url: str, queue_name: str, tmp_path: Path
) -> None:
    marker = tmp_path / "up"
    marker.mkdir()
    env = dict(os.environ, ECHOMQ_TEST_QUEUE=queue_name, ECHOMQ_TEST_MARKER=str(marker))
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "echomq", "--url", valkey_url, "worker", "periodic_app:app"]
    queue = await Queue.connect(valkey_url, queue_name)
    workers = [
        await asyncio.create_subprocess_exec(*command, "--beat", "0.1", env=env) for _ in range(3)
    ]
    try:
        while len(os.listdir(marker)) < 3:  # another process's start has no event: polled
            await asyncio.sleep(0.05)
        up = await server_ms(queue)
        first = up // 1000 * 1000 + 1000  # the window: WINDOW ticks from the first all saw up
        # The schedule's own time passing (no event to wait on), into the window's last second.
        await asyncio.sleep((first + (WINDOW - 1) * 1000 + 200 - up) / 1000)
        stop = await at_ms_of_second(queue, 500)
    finally:
        for process in workers:
            process.send_signal(signal.SIGTERM)
        codes = [await asyncio.wait_for(process.wait(), 15) for process in workers]
    assert codes == [0, 0, 0]
    ids = (tmp_path / "ran.log").read_text().split()
    assert len(ids) == len(set(ids)), "an occurrence ran twice"
    ticks = sorted(unix_ms(id) for id in ids)
    assert ticks == list(range(ticks[0], ticks[-1] + 1, 1_000)), "a tick is missing"
    assert ticks[0] <= first  # from the first tick all three were up
    assert ticks[-1] == stop // 1000 * 1000  # to the last before SIGTERM
    assert all(id == occurrence_id("beat", unix_ms(id)) for id in ids)
    # Exactly one occurrence per second of the window, however many processes scheduled it.
    window = [tick for tick in ticks if first <= tick < first + WINDOW * 1000]
    assert window == list(range(first, first + WINDOW * 1000, 1000))
    print(f"3 worker processes, a {WINDOW} s window: {len(window)} occurrences, one a tick")
    await queue.pause()
    await queue.obliterate(force=True)
    await queue.close()

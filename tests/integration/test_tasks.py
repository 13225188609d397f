"""Tasks against a real Valkey: routing by name, results and failures through handles, the
per-attempt timeout, hooks and context, unknown tasks, batches, lanes, and the sync producer."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from echomq import (
    App,
    AppWorker,
    ConsumerOptions,
    Defer,
    Fixed,
    InvalidArgument,
    Queue,
    ResultTimeout,
    Retry,
    TaskFailed,
    context,
)
from echomq.consumers import Metronome
from echomq.engine import Minter
from echomq.errors import HookFailed, ResultMissing
from echomq.server.cluster import EmbeddedCluster

FAST = ConsumerOptions(beat=0.1, backoff=Fixed(0.0))


async def forget(app: App) -> None:
    """Delete every key of the queues the app made (tests never flush the server)."""
    for name in list(app._queues):
        queue = app.queue(name)
        await queue.pause()
        await queue.obliterate(force=True)
    await app.close()


@pytest.fixture
async def app(valkey_url: str, queue_name: str) -> AsyncIterator[App]:
    app = App(valkey_url, queue=queue_name)
    await app.connect()
    yield app
    await forget(app)


async def test_two_tasks_on_one_queue_are_routed_by_name_and_their_results_read(app: App) -> None:
    @app.task
    async def add(a: int, b: int) -> int:
        return a + b

    @app.task(name="shout")
    async def shout(word: str, *, times: int = 2) -> str:
        return word.upper() * times

    total = await add.enqueue(2, 3)
    loud = await shout.enqueue("hi", times=3)
    assert total.verdict.kind == loud.verdict.kind == "enqueued"
    info = await app.queue().job(total.id)
    assert info is not None
    assert info.payload == {"task": add.fn.__qualname__, "args": {"a": 2, "b": 3}}
    tallies = await AppWorker(app, options=FAST).run_until_idle()
    assert tallies[app.default_queue].completed == 2
    assert await total.result(timeout=5) == 5
    assert await loud.result(timeout=5) == "HIHIHI"
    status = await loud.status()
    assert status is not None
    assert (status.state, status.attempts, status.result) == ("completed", 1, "HIHIHI")


async def test_a_task_that_fails_for_good_raises_task_failed_with_its_traceback(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[int] = []

    @app.task(retries=1)
    async def divide(a: int, b: int) -> float:
        runs.append(context().attempt)
        return a / b

    handle = await divide.enqueue(1, 0)
    with caplog.at_level(logging.ERROR, logger="echomq.tasks"):
        await AppWorker(app, options=FAST).run_until_idle()
    assert runs == [1, 2]  # retries=1: two attempts, whatever the consumer's max_attempts
    with pytest.raises(TaskFailed) as failed:
        await handle.result(timeout=5)
    assert failed.value.error == "ZeroDivisionError: division by zero"
    assert failed.value.traceback is not None
    assert failed.value.traceback.rstrip().endswith("ZeroDivisionError: division by zero")
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2  # one record per failed attempt, each with its traceback
    assert all(r.exc_info and r.exc_info[0] is ZeroDivisionError for r in errors)


async def test_a_timeout_cancels_the_attempt_retries_it_and_buries_it_as_timeout(
    app: App,
) -> None:
    cancelled: list[int] = []

    @app.task(timeout=0.05, retries=1)
    async def stuck() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(context().attempt)
            raise

    handle = await stuck.enqueue()
    await AppWorker(app, options=FAST).run_until_idle()
    assert cancelled == [1, 2]
    with pytest.raises(TaskFailed, match="timeout") as failed:
        await handle.result()
    assert failed.value.error == "timeout"
    info = await handle.status()
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == ("dead", 2, "timeout")


async def test_startup_state_context_and_job_hooks_are_seen_by_tasks(app: App) -> None:
    seen: list[str] = []

    @app.on_startup
    async def open_db(state: dict[str, object]) -> None:
        state["db"] = "connected"

    @app.on_shutdown
    async def close_db(state: dict[str, object]) -> None:
        seen.append(f"shutdown {state['db']}")

    @app.before_job
    async def before(ctx: object) -> None:
        seen.append(f"before {context().task}")

    @app.after_job
    async def after(ctx: object, outcome: object) -> None:
        seen.append(f"after {context().attempt} {getattr(outcome, 'result', None)}")

    @app.task(name="probe")
    async def probe() -> str:
        ctx = context()
        return f"{ctx.state['db']} {ctx.job.queue} {ctx.app is app}"

    handle = await probe.enqueue()
    await AppWorker(app, options=FAST).run_until_idle()
    assert await handle.result(timeout=5) == f"connected {app.default_queue} True"
    assert seen == [
        "before probe",
        f"after 1 connected {app.default_queue} True",
        "shutdown connected",
    ]


async def test_a_failing_startup_hook_stops_the_worker_with_a_clear_error(app: App) -> None:
    closed: list[str] = []

    @app.on_startup
    async def opens(state: dict[str, object]) -> None:
        state["pool"] = "open"

    @app.on_startup
    async def broken(state: dict[str, object]) -> None:
        raise RuntimeError("no database")

    @app.on_shutdown
    async def closes(state: dict[str, object]) -> None:
        closed.append(str(state.get("pool")))

    with pytest.raises(HookFailed, match="broken failed: RuntimeError: no database") as failed:
        await AppWorker(app, options=FAST).run_until_idle()
    assert isinstance(failed.value.error, RuntimeError)
    assert closed == ["open"]  # what the first hook opened is closed


async def test_an_unknown_task_is_retried_then_dead_and_a_payload_no_task_dead_at_once(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task
    async def known() -> None: ...

    unknown = await app.queue().enqueue({"task": "gone", "args": {}})
    garbage = await app.queue().enqueue(["not", "a", "task"])
    options = dataclasses.replace(FAST, max_attempts=2, backoff=Fixed(0.0))
    with caplog.at_level(logging.ERROR, logger="echomq.tasks"):
        await AppWorker(app, options=options).run_until_idle()
    info = await app.queue().job(unknown.id)
    assert info is not None
    # A rolling deploy: an older worker meets a newer task and leaves it to a later attempt.
    assert (info.state, info.attempts, info.last_error) == ("dead", 2, "unknown task gone")
    assert any("this worker has: " in r.getMessage() and "known" in r.getMessage()
               for r in caplog.records)  # fmt: skip
    info = await app.queue().job(garbage.id)
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == ("dead", 1, "not a task")


async def test_wrong_arguments_are_refused_before_any_write(app: App) -> None:
    @app.task
    async def send(tenant: str, to: str, tags: object = None) -> None: ...

    with pytest.raises(InvalidArgument, match="parameter 'to' expects str, got int"):
        await send.enqueue("acme", 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="missing a required argument: 'to'"):
        await send.enqueue("acme")  # type: ignore[call-arg]
    with pytest.raises(InvalidArgument, match="not JSON-encodable"):
        await send.enqueue("acme", "a@acme.test", {1, 2})
    counts = await app.queue().counts()
    assert (counts.pending, counts.scheduled, counts.lanes) == (0, 0, 0)


async def test_enqueue_many_sends_one_batch_per_queue_with_handles_in_input_order(
    app: App, queue_name: str
) -> None:
    @app.task(dedup="key")
    async def here(key: str) -> str:
        return f"here {key}"

    @app.task(queue=f"{queue_name}-other", lane="tenant")
    async def there(tenant: str) -> str:
        return f"there {tenant}"

    handles = await app.enqueue_many(
        [here.call("a"), there.call("acme"), here.call("a"), there.using(delay=0.05).call("zen")]
    )
    assert [h.verdict.kind for h in handles] == ["enqueued", "enqueued", "duplicate", "scheduled"]
    assert handles[2].id == handles[0].id
    other = app.queue(f"{queue_name}-other")
    rows = [await other.job(h.id) for h in handles[1::2]]
    assert [(r.lane, r.state) for r in rows if r] == [("acme", "pending"), ("zen", "scheduled")]
    await AppWorker(app, options=FAST).run_until_idle()  # waits for the scheduled one too
    assert [await h.result(timeout=5) for h in handles] == [
        "here a",
        "there acme",
        "here a",
        "there zen",
    ]


async def test_run_until_idle_leaves_paused_lanes_and_far_schedules_behind(app: App) -> None:
    @app.task(lane="tenant")
    async def note(tenant: str) -> str:
        return tenant

    await app.connect()
    await app.queue().lane("held").pause()
    held = await note.enqueue("held")
    later = await note.using(delay=3600).enqueue("later")
    soon = await note.using(delay=0.2).enqueue("soon")  # within the horizon: waited for
    now = await note.enqueue("now")
    await asyncio.wait_for(AppWorker(app, options=FAST).run_until_idle(), 20)
    assert [await h.result(timeout=1) for h in (now, soon)] == ["now", "soon"]
    assert await app.queue().state(held.id) == "pending"
    assert await app.queue().state(later.id) == "scheduled"
    with pytest.raises(InvalidArgument, match="scheduled_within"):
        await AppWorker(app).run_until_idle(scheduled_within=-1)


async def test_enqueue_many_schedules_at_a_time_and_refuses_a_bad_one_alone(app: App) -> None:
    @app.task()
    async def tick(n: int) -> int:
        return n

    soon = time.time() + 3600
    handles = await app.enqueue_many(
        [
            tick.using(at=soon).call(1),
            tick.using(at=soon * 1000).call(2),  # milliseconds: refused, nothing written
            tick.using(at=time.time() - 60).call(3),  # in the past: runs now
        ]
    )
    assert [h.verdict.kind for h in handles] == ["scheduled", "error", "enqueued"]
    assert "milliseconds" in str(handles[1].verdict.error)
    counts = await app.queue().counts()
    assert (counts.scheduled, counts.pending) == (1, 1)


async def test_lane_settings_are_applied_the_first_time_a_lane_is_used(app: App) -> None:
    @app.task(lane=lambda tenant, n: f"t-{tenant}", lane_limit=2, lane_rate=(10, 1.0))
    async def work(tenant: str, n: int) -> None: ...

    await work.enqueue("acme", 1)
    await work.using(lane="vip").enqueue("acme", 2)
    lanes = {lane.lane: lane for lane in await app.queue().lanes()}
    assert (lanes["t-acme"].limit, lanes["t-acme"].rate) == (2, (10, 1.0))
    assert (lanes["vip"].limit, lanes["vip"].rate) == (2, (10, 1.0))
    with pytest.raises(InvalidArgument, match="invalid lane"):
        await work.using(lane="").enqueue("acme", 3)
    # In a batch a bad lane costs its own item alone, as an error verdict.
    handles = await app.enqueue_many([work.using(lane="").call("a", 4), work.call("b", 5)])
    assert [h.verdict.kind for h in handles] == ["error", "enqueued"]
    assert isinstance(handles[0].verdict.error, InvalidArgument)


class Address(BaseModel):
    city: str


@dataclass
class Parcel:
    to: Address
    grams: int


async def test_models_and_dataclasses_travel_as_json_and_are_rebuilt(app: App) -> None:
    @app.task
    async def ship(parcel: Parcel, extra: list[Address]) -> Address:
        assert isinstance(parcel.to, Address)
        assert isinstance(extra[0], Address)
        return Address(city=parcel.to.city + extra[0].city)

    handle = await ship.enqueue(Parcel(Address(city="Oslo"), 10), [Address(city="!")])
    info = await app.queue().job(handle.id)
    assert info is not None
    assert info.payload["args"] == {"parcel": {"to": {"city": "Oslo"}, "grams": 10},
                                    "extra": [{"city": "!"}]}  # fmt: skip
    await AppWorker(app, options=FAST).run_until_idle()
    assert await handle.result(timeout=5) == Address(city="Oslo!")


async def test_result_waits_time_out_and_a_missing_row_says_so(app: App) -> None:
    @app.task
    async def later() -> None: ...

    handle = await later.enqueue()
    with pytest.raises(ResultTimeout) as timed_out:
        await handle.result(timeout=0.05)
    assert timed_out.value.state == "pending"
    with pytest.raises(ResultMissing):
        await later.handle(Minter(7).mint("JOB")).result()  # a job never admitted


async def test_the_sync_producer_enqueues_and_its_handle_blocks_for_the_result(
    app: App,
) -> None:
    @app.task(lane="tenant", lane_limit=3)
    async def greet(tenant: str) -> str:
        return f"hello {tenant}"

    handle = await asyncio.to_thread(greet.enqueue_sync, "acme")
    assert handle.verdict.kind == "enqueued"
    (lane,) = await app.queue().lanes(["acme"])
    assert lane.limit == 3
    worker = asyncio.ensure_future(AppWorker(app, options=FAST).run_until_idle())
    assert await asyncio.to_thread(handle.result, 5) == "hello acme"
    await worker


async def test_a_worker_serves_only_the_queues_it_is_given(app: App, queue_name: str) -> None:
    @app.task
    async def mine() -> str:
        return "mine"

    @app.task(queue=f"{queue_name}-b")
    async def theirs() -> str:
        return "theirs"

    assert app.queue_names() == sorted([queue_name, f"{queue_name}-b"])
    first, second = await mine.enqueue(), await theirs.enqueue()
    await AppWorker(app, [f"{queue_name}-b"], FAST).run_until_idle()
    assert await second.result(timeout=5) == "theirs"
    assert (await first.status()).state == "pending"  # type: ignore[union-attr]


async def test_one_worker_keeps_each_queues_own_lanes_and_gates(app: App, queue_name: str) -> None:
    """Two queues in one worker, each with lanes named alike: a pause and a ceiling on one
    queue's lanes hold there and nowhere else."""
    gated, free = queue_name, f"{queue_name}-free"
    running = dict.fromkeys((gated, free), 0)
    peak = dict.fromkeys((gated, free), 0)

    def on(queue: str) -> Any:
        @app.task(queue=queue, name=f"work-{queue}", lane="tenant")
        async def work(tenant: str, n: int) -> str:
            running[queue] += 1
            peak[queue] = max(peak[queue], running[queue])
            await asyncio.sleep(0.05)  # the job's own work, so jobs that may overlap do
            running[queue] -= 1
            return f"{queue}:{tenant}:{n}"

        return work

    tasks = {queue: on(queue) for queue in (gated, free)}
    await app.queue(gated).lane("held").pause()
    await app.queue(gated).lane("one").limit(1)
    handles = {
        queue: [await task.enqueue("held", 0)] + [await task.enqueue("one", n) for n in range(4)]
        for queue, task in tasks.items()
    }
    options = ConsumerOptions(beat=0.1, concurrency=8, backoff=Fixed(0.0))
    await asyncio.wait_for(AppWorker(app, options=options).run_until_idle(), 30)
    assert (peak[gated], peak[free]) == (1, 5)  # one lane's ceiling, not its namesake's
    assert await app.queue(gated).state(handles[gated][0].id) == "pending"  # paused there only
    assert [await h.result(timeout=5) for h in handles[free]] == [
        f"{free}:held:0",
        *(f"{free}:one:{n}" for n in range(4)),
    ]
    assert [await h.result(timeout=5) for h in handles[gated][1:]] == [
        f"{gated}:one:{n}" for n in range(4)
    ]


async def test_an_app_on_a_cluster_serves_two_queues_and_reads_their_results(
    valkey_cluster: EmbeddedCluster, queue_name: str
) -> None:
    app = App(valkey_cluster.url, queue=queue_name)

    @app.task
    async def here(n: int) -> int:
        return n + 1

    @app.task(queue=f"{queue_name}-b", lane="n")
    async def there(n: int) -> str:
        return f"b{n}"

    await app.connect()
    try:
        handles = await app.enqueue_many([here.call(1), there.call(2), here.call(3)])
        waiting = asyncio.ensure_future(handles[1].result(timeout=10))
        await AppWorker(app, options=FAST).run_until_idle()
        assert await waiting == "b2"
        assert [await h.result(timeout=5) for h in handles] == [2, "b2", 4]
    finally:
        await forget(app)


async def test_an_app_on_a_lent_wire_and_minter_shares_them_and_leaves_them_open(
    valkey_url: str, queue_name: str
) -> None:
    with pytest.raises(InvalidArgument, match="minter"):
        App(valkey_url, minter=Minter(1))  # a minter without the wire it mints for
    async with await Queue.connect(valkey_url, f"{queue_name}-raw") as raw:
        minter = Minter.leased(raw.wire)
        await minter.ready()
        app = App(queue=queue_name, wire=raw.wire, minter=minter, result_ttl=60)

        @app.task
        async def node(n: int) -> int:
            return n * 2

        handle = await node.enqueue(21)  # no connect: the lent wire is the app's
        assert app.queue().minter is minter
        assert app.queue().wire is raw.wire
        assert handle.id.startswith("JOB")
        await AppWorker(app, options=FAST).run_until_idle()
        assert await handle.result(timeout=5) == 42
        with pytest.raises(InvalidArgument, match="url"):
            app.sync_queue()  # blocking sockets of its own: it would need to know where to
        await forget(app)  # closes the app: the lent wire and minter stay the lender's
        assert await raw.wire.call("PING") in ("PONG", b"PONG")
        assert minter.is_ready
        assert (await raw.enqueue({"n": 1})).kind == "enqueued"
        await raw.pause()
        await raw.obliterate(force=True)
        await minter.release()


async def test_two_workers_of_one_app_each_give_their_tasks_their_own_state(app: App) -> None:
    @app.task(lane="who")
    async def greet(who: str) -> str:
        return f"{context().state['greeting']}, {who}"

    ours, theirs = await greet.using(lane="a").enqueue("ada"), await greet.enqueue("bob")
    await app.queue().lane("bob").pause()
    await AppWorker(app, options=FAST, state={"greeting": "hello"}).run_until_idle()
    await app.queue().lane("bob").resume()
    await app.queue().lane("a").pause()
    await AppWorker(app, options=FAST, state={"greeting": "hi"}).run_until_idle()
    assert await ours.result(timeout=5) == "hello, ada"
    assert await theirs.result(timeout=5) == "hi, bob"
    assert app.state == {}  # neither worker wrote to the app's own
    with pytest.raises(InvalidArgument, match="state"):
        AppWorker(app, state=[])  # type: ignore[arg-type]


async def test_a_deferred_task_that_asks_for_a_retry_keeps_its_own_attempts(app: App) -> None:
    """Deferrals are no failures: a task deferred twice still gets its retry (the worker
    used to count the claims, and buried it at its first Retry)."""
    seen: list[int] = []

    @app.task(retries=1)
    async def flaky() -> str:
        seen.append(context().attempt)
        if len(seen) <= 2:
            raise Defer(0.01, "over budget")
        if len(seen) == 3:
            raise Retry(0.01, "transient")
        return "done"

    handle = await flaky.enqueue()
    await AppWorker(app, options=FAST).run_until_idle()
    assert await handle.result(timeout=5) == "done"
    assert seen == [1, 2, 3, 4]
    info = await app.queue().job(handle.id)
    assert info is not None
    assert (info.attempts, info.last_error) == (4, "Retry: transient")


async def test_a_pool_of_workers_on_one_queue_shares_a_metronome(app: App) -> None:
    @app.task
    async def one(n: int) -> int:
        return n

    metronome = Metronome(app.queue())
    workers = [AppWorker(app, options=FAST, metronome=metronome) for _ in range(2)]
    with pytest.raises(InvalidArgument, match="metronome"):
        AppWorker(app, [app.default_queue, "other"], metronome=metronome)
    handles = await app.enqueue_many([one.call(n) for n in range(20)])
    beats = asyncio.ensure_future(metronome.run())
    runs = [asyncio.ensure_future(w.run()) for w in workers]
    try:
        assert [await h.result(timeout=10) for h in handles] == list(range(20))
    finally:
        for worker in workers:
            worker.stop()
        tallies = await asyncio.gather(*runs)
        metronome.stop()
        await beats
    assert sum(t[app.default_queue].completed for t in tallies) == 20


async def test_an_app_made_before_its_pool_borrows_it_at_connect(
    valkey_url: str, queue_name: str
) -> None:
    app = App(queue=queue_name, result_ttl=60)  # at import time, as a web app makes it

    @app.task
    async def double(n: int) -> int:
        return n * 2

    async with await Queue.connect(valkey_url, f"{queue_name}-raw") as raw:  # the lifespan's
        other = await Queue.connect(valkey_url, f"{queue_name}-other")
        await app.connect(wire=raw.wire)
        assert app.wire is raw.wire
        with pytest.raises(InvalidArgument, match="wire"):
            await app.connect(wire=other.wire)  # connected already: one wire at a time
        handle = await double.enqueue(21)
        await AppWorker(app, options=FAST).run_until_idle()
        assert await handle.result(timeout=5) == 42
        await forget(app)  # the lent wire stays open: the lifespan's to close
        assert await raw.wire.call("PING") in ("PONG", b"PONG")
        assert app.wire is raw.wire  # still the app's: it never falls back to a default URL
        await app.connect(wire=other.wire)  # closed, it may be lent another
        assert app.wire is other.wire
        await app.close()
        await other.close()

"""Consumers against a real Valkey: parking, the metronome, leases, stops, crashes."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import time
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from echomq import Exponential, Fixed, InvalidArgument, Item, Job, Queue
from echomq.consumers.consumer import Consumer, ConsumerOptions, Drop, Retry
from echomq.consumers.metronome import Metronome
from echomq.testing import discard
from echomq.wire.connector import Connector
from echomq.wire.url import ConnectionOptions, seeds_from_url

HERE = Path(__file__).resolve().parent


async def commandstats(url: str) -> dict[str, int]:
    """Calls per command, summed over every node the URL names (the primaries of a cluster)."""
    calls: dict[str, int] = {}
    for seed in seeds_from_url(url):
        async with Connector(seed, version_fence=None) as admin:
            info = (await admin.call("INFO", "commandstats")).decode()
        for line in info.splitlines():
            if line.startswith("cmdstat_"):
                name, rest = line[8:].split(":", 1)
                calls[name] = calls.get(name, 0) + int(rest.split("calls=")[1].split(",")[0])
    return calls


def spent(before: dict[str, int], after: dict[str, int], *names: str) -> int:
    return sum(after.get(n, 0) - before.get(n, 0) for n in names)


async def until(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """Poll a condition that has no event to wait on (another process's progress)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


async def test_idle_consumer_sends_at_most_one_command_per_beat(
    queue: Queue, valkey_url: str
) -> None:
    async def never(job: Job) -> None:
        raise AssertionError("nothing was enqueued")

    consumer = Consumer(queue, never, ConsumerOptions(beat=0.2))
    running = asyncio.ensure_future(consumer.run())
    await until(lambda: _parked(valkey_url))
    started = time.monotonic()
    before = await commandstats(valkey_url)
    await asyncio.sleep(1.0)  # five idle beats: the thing measured is time itself
    after = await commandstats(valkey_url)
    beats = (time.monotonic() - started) / 0.2
    consumer.stop()
    await running
    reads = spent(before, after, "blpop")
    # One parked read per beat at most (the server may end a BLPOP late, never early).
    assert 2 <= reads <= beats + 1
    # No claim polling, and no upkeep: nothing is scheduled, leased or benched, so the last
    # upkeep said nothing falls due (the next one is idle_upkeep away).
    assert spent(before, after, "evalsha", "evalsha_ro") == 0


async def test_a_job_scheduled_while_consumers_idle_runs_when_due(queue: Queue) -> None:
    ran = asyncio.Event()

    async def handler(job: Job) -> None:
        ran.set()

    consumer = Consumer(queue, handler, ConsumerOptions(beat=0.2, idle_upkeep=600))
    running = asyncio.ensure_future(consumer.run())
    await queue.enqueue_in(0.3, "later")  # its "s" token makes the parked consumer look ahead
    await asyncio.wait_for(ran.wait(), 10)  # long before the 600 s idle upkeep
    consumer.stop()
    await running


async def _parked(url: str) -> bool:
    for seed in seeds_from_url(url):
        async with Connector(seed, version_fence=None) as admin:
            if b"cmd=blpop" in await admin.call("CLIENT", "LIST"):
                return True
    return False


async def test_metronome_pool_sends_fewer_commands_than_standalone_consumers(
    valkey_url: str, queue_name: str
) -> None:
    async def count_for(metronome: bool, suffix: str) -> tuple[int, int]:
        q = await Queue.connect(valkey_url, f"{queue_name}{suffix}", pool_size=2, events=False)
        started: list[str] = []

        async def handler(job: Job) -> None:
            started.append(job.id)

        beat = Metronome(q, beat=0.2) if metronome else None
        consumers = [
            Consumer(q, handler, ConsumerOptions(beat=0.2), metronome=beat) for _ in range(8)
        ]
        tasks = [asyncio.ensure_future(c.run()) for c in consumers]
        ticking = asyncio.ensure_future(beat.run()) if beat else None
        await asyncio.sleep(0.3)  # let all eight settle into parking
        before = await commandstats(valkey_url)
        claims_before = sum(c.tally.claims for c in consumers)
        await q.enqueue("one")
        await until(lambda: _true(len(started) == 1))
        await asyncio.sleep(1.0)  # five beats of idleness after the job
        after = await commandstats(valkey_url)
        for c in consumers:
            c.stop()
        if beat:
            beat.stop()
            await ticking  # type: ignore[misc]
        await asyncio.gather(*tasks)
        assert len(started) == 1
        used = spent(before, after, "blpop", "evalsha")
        await discard(q)
        return used, sum(c.tally.claims for c in consumers) - claims_before

    herd, _ = await count_for(False, "-standalone")
    pool, pool_claims = await count_for(True, "-metronome")
    assert pool < herd, (pool, herd)
    assert pool_claims <= 8  # one wake: one claim per idle consumer, one of them got the job


async def _true(value: bool) -> bool:
    return value


async def test_poison_job_goes_dead_after_max_attempts_and_others_complete(queue: Queue) -> None:
    done: list[str] = []

    async def handler(job: Job) -> None:
        if job.payload == "poison":
            raise ValueError(f"boom {job.attempts}")
        done.append(job.payload)

    options = ConsumerOptions(beat=0.05, max_attempts=3, backoff=Fixed(0.01), concurrency=4)
    consumer = Consumer(queue, handler, options)
    running = asyncio.ensure_future(consumer.run())
    poison = await queue.enqueue("poison", lane="p")
    await queue.enqueue_many(["a", "b", "c"])

    async def settled() -> bool:
        counts = await queue.counts()
        return counts.dead == 1 and counts.completed == 3

    await until(settled)
    consumer.stop()
    tally = await running
    info = await queue.job(poison.id)
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == ("dead", 3, "ValueError: boom 3")
    assert sorted(done) == ["a", "b", "c"]
    assert (tally.completed, tally.dead, tally.retried) == (3, 1, 2)


async def test_retry_and_drop_signals(queue: Queue) -> None:
    async def handler(job: Job) -> None:
        if job.payload == "drop":
            raise Drop("not worth it")
        if job.attempts == 1:
            raise Retry(0.01)

    consumer = Consumer(queue, handler, ConsumerOptions(beat=0.05, max_attempts=5))
    running = asyncio.ensure_future(consumer.run())
    dropped = await queue.enqueue("drop")
    retried = await queue.enqueue("again")

    async def settled() -> bool:
        counts = await queue.counts()
        return counts.dead == 1 and counts.completed == 1

    await until(settled)
    consumer.stop()
    await running
    info = await queue.job(dropped.id)
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == ("dead", 1, "dropped: not worth it")
    assert await queue.job(retried.id) is None  # completed on its second attempt


async def test_long_job_keeps_its_lease_and_is_not_reaped(queue: Queue) -> None:
    attempts: list[int] = []

    async def handler(job: Job) -> None:
        attempts.append(job.attempts)
        await asyncio.sleep(0.9)  # three times the lease

    consumer = Consumer(queue, handler, ConsumerOptions(lease=0.3, beat=0.05))
    running = asyncio.ensure_future(consumer.run())
    await queue.enqueue("long")
    await until(lambda: _completed(queue, 1))
    consumer.stop()
    tally = await running
    assert attempts == [1]
    assert (tally.completed, tally.lost) == (1, 0)


async def _completed(queue: Queue, n: int) -> bool:
    return (await queue.counts()).completed >= n


async def _state_is(queue: Queue, job_id: str, state: str) -> bool:
    return await queue.state(job_id) == state


@pytest.mark.parametrize("loop", ["consumer", "metronome"])
async def test_a_loop_stopped_while_its_wake_connection_is_made_ends_cleanly(
    valkey_server: Any, queue_name: str, loop: str
) -> None:
    # A relay to the real server that holds the connections opened after `holding` unanswered:
    # the loop's wake connection is caught mid-handshake, and stopped there. This is what
    # run_until_idle and `echomq worker --burst` do on an idle queue; Closed escaped run().
    upstream = ConnectionOptions.from_url(valkey_server.url)
    holding, held = False, asyncio.Event()
    sockets: list[asyncio.StreamWriter] = []

    async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
        sink.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sockets.append(writer)
        if holding:
            await reader.read(1)  # the handshake has been sent: it is never answered
            held.set()
            return
        up_reader, up_writer = await asyncio.open_connection(upstream.host, upstream.port)
        sockets.append(up_writer)
        await asyncio.gather(
            pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True
        )

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    parts = urlsplit(valkey_server.url)
    through = parts._replace(netloc=f"{parts.netloc.rpartition('@')[0]}@127.0.0.1:{port}")
    queue = await Queue.connect(urlunsplit(through).replace("//@", "//"), queue_name, pool_size=1)
    try:
        holding = True

        async def never(job: Job) -> None:
            raise AssertionError("nothing was enqueued")

        stoppable: Consumer | Metronome
        if loop == "consumer":
            stoppable = Consumer(queue, never, ConsumerOptions(beat=0.2))
        else:
            stoppable = Metronome(queue, beat=0.2)
        running = asyncio.ensure_future(stoppable.run())
        await asyncio.wait_for(held.wait(), 5)
        stoppable.stop()
        await asyncio.wait_for(running, 5)  # returns: no Closed out of run()
        if isinstance(stoppable, Consumer):
            assert (stoppable.tally.completed, stoppable.tally.claims) == (0, 0)
    finally:
        await discard(queue)
        for writer in sockets:
            writer.close()
        server.close()
        await server.wait_closed()


class SlowUpkeep(Queue):
    """A queue whose upkeep waits until told: a stop can land inside it, deterministically."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_upkeep = asyncio.Event()
        self.go_on = asyncio.Event()
        self.upkept = asyncio.Event()

    async def upkeep(self, limit: int = 1000, max_stalled: int = 3) -> Any:
        self.in_upkeep.set()
        await self.go_on.wait()
        try:
            return await super().upkeep(limit, max_stalled)
        finally:
            self.upkept.set()


@pytest.mark.parametrize("when", ["during its upkeep", "while nobody is idle"])
async def test_a_metronome_with_nobody_idle_stops_at_once(queue: Queue, when: str) -> None:
    """A metronome no consumer has registered with waits for a registration, up to its beat
    (30 s here): a stop, during the upkeep before that wait or during the wait, ends it now."""
    slow = SlowUpkeep(queue.name, queue.wire)
    metronome = Metronome(slow, beat=30, idle_upkeep=600)
    running = asyncio.ensure_future(metronome.run())
    await asyncio.wait_for(slow.in_upkeep.wait(), 5)
    if when == "during its upkeep":
        metronome.stop()
        slow.go_on.set()
    else:
        slow.go_on.set()
        await slow.upkept.wait()
        await asyncio.sleep(0)  # the metronome's turn: from its upkeep into that wait
        metronome.stop()
    await asyncio.wait_for(running, 2)
    await slow.close()


async def test_stop_lets_the_job_in_hand_finish(queue: Queue) -> None:
    started = asyncio.Event()

    async def handler(job: Job) -> None:
        started.set()
        await asyncio.sleep(0.3)

    consumer = Consumer(queue, handler, ConsumerOptions(beat=0.05))
    running = asyncio.ensure_future(consumer.run())
    await queue.enqueue("x")
    await started.wait()
    consumer.stop()
    tally = await running
    assert tally.completed == 1
    assert (await queue.counts()).active == 0


async def test_a_finished_jobs_task_is_freed_without_the_garbage_collector(queue: Queue) -> None:
    """A job's task and the Abort its context holds let go of each other as it ends: no
    cycle left for the collector (a pass every hundred jobs or so: 2-3 µs per job)."""
    tasks: list[weakref.ref[asyncio.Task[Any]]] = []

    async def handler(job: Job) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.append(weakref.ref(task))

    class Settles:
        def __init__(self) -> None:
            self.count, self.all = 0, asyncio.Event()

        def claimed(self, queue: str, jobs: Any, lease_ms: int) -> None:
            pass

        def settled(self, queue: str, job: Job, outcome: str) -> None:
            self.count += 1
            if self.count == 3:
                self.all.set()

    await queue.enqueue_many([Item(n) for n in range(3)])
    gc.collect()
    gc.disable()
    try:
        settles = Settles()
        consumer = Consumer(queue, handler, ConsumerOptions(beat=0.05), observer=settles)
        running = asyncio.ensure_future(consumer.run())
        await settles.all.wait()
        consumer.stop()
        await running
        assert len(tasks) == 3
        assert [ref() for ref in tasks] == [None, None, None]
    finally:
        gc.enable()


@pytest.mark.every_loop
async def test_the_settles_of_freed_slots_and_the_next_claim_share_one_write(
    valkey_server: Any, queue_name: str
) -> None:
    """One connection, as a worker process has (``--pool 1``): the completes a round of
    finished jobs leaves and the claim that refills their slots go out in one write, not two
    (the complete alone on the idle connection, then the claim)."""
    queue = await Queue.connect(valkey_server.url, queue_name)  # the single server, one socket
    try:
        await queue.enqueue_many([Item(n) for n in range(200)])

        async def noop(job: Job) -> None:
            return None

        connector = queue.wire.members[0]  # type: ignore[attr-defined]
        before = connector.writes
        consumer = Consumer(queue, noop, ConsumerOptions(concurrency=10))
        running = asyncio.ensure_future(consumer.run())
        while consumer.tally.completed < 200:
            await asyncio.sleep(0.01)
        consumer.stop()
        tally = await running
        writes = connector.writes - before
        # 20 rounds of 10: about one write per claim (more for the start's upkeep, the
        # stop's last settles, a round split across loop turns), where settles written apart
        # from the claims made it two per claim.
        assert tally.claims >= 20
        assert writes < 1.5 * tally.claims, (writes, tally.claims)
    finally:
        await discard(queue)


def test_bad_handler_and_options_are_refused_before_connecting() -> None:
    from echomq.consumers.worker import load_handler

    with pytest.raises(InvalidArgument, match=r"expected package\.module:function"):
        load_handler("no_colon")
    with pytest.raises(InvalidArgument, match="cannot import no_such_module"):
        load_handler("no_such_module:handler")
    with pytest.raises(InvalidArgument, match="must be an async function"):
        load_handler("json:dumps")
    with pytest.raises(InvalidArgument, match="invalid concurrency 0"):
        ConsumerOptions(concurrency=0)
    with pytest.raises(InvalidArgument, match="invalid lease -1"):
        ConsumerOptions(lease=-1)
    with pytest.raises(InvalidArgument, match="invalid base -1"):
        Exponential(-1, 1)

    def sync_handler(job: Job) -> None: ...

    with pytest.raises(InvalidArgument, match="must be an async function"):
        Consumer(None, sync_handler)  # type: ignore[arg-type]


def worker_command(url: str, queue_name: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "echomq.cli", "--url", url, "worker",
            "worker_handlers:sleepy", "--queue", queue_name, *extra]  # fmt: skip


def worker_env(marker: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    env["ECHOMQ_TEST_MARKER"] = str(marker)
    return env


async def test_worker_process_killed_mid_job_loses_nothing(
    queue: Queue, valkey_url: str, tmp_path: Path
) -> None:
    verdict = await queue.enqueue({"sleep": 30})
    marker = tmp_path / "started"
    doomed = await asyncio.create_subprocess_exec(
        *worker_command(valkey_url, queue.name, "--lease", "0.5", "--beat", "0.1"),
        env=worker_env(marker),
    )
    await until(lambda: _true(marker.exists() and marker.read_text().endswith("\n")))
    assert marker.read_text().split() == [verdict.id, "1"]
    doomed.send_signal(signal.SIGKILL)
    assert await doomed.wait() == -signal.SIGKILL
    assert await queue.state(verdict.id) == "active"  # still leased by the dead process

    attempts: list[int] = []

    async def finisher(job: Job) -> None:
        attempts.append(job.attempts)

    consumer = Consumer(queue, finisher, ConsumerOptions(beat=0.1))
    running = asyncio.ensure_future(consumer.run())
    await until(lambda: _completed(queue, 1))
    consumer.stop()
    await running
    assert attempts == [2]
    assert await queue.job(verdict.id) is None


async def test_sigterm_lets_the_worker_finish_its_job_and_exit_zero(
    queue: Queue, valkey_url: str, tmp_path: Path
) -> None:
    await queue.enqueue({"sleep": 1})
    marker = tmp_path / "started"
    worker = await asyncio.create_subprocess_exec(
        *worker_command(valkey_url, queue.name, "--beat", "0.1"),
        env=worker_env(marker),
    )
    await until(lambda: _true(marker.exists() and marker.read_text().endswith("\n")))
    worker.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(worker.wait(), 10) == 0
    counts = await queue.counts()
    assert (counts.completed, counts.active, counts.pending) == (1, 0, 0)


async def test_worker_refuses_a_sync_handler_before_connecting(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "echomq.cli", "--url", "valkey://127.0.0.1:1", "worker",
               "worker_handlers:not_async", "--queue", "q"]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *command, env=worker_env(tmp_path / "m"), stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    assert proc.returncode == 2
    assert b"must be an async function" in err


async def test_worker_max_stalled_sets_how_many_crashes_a_job_survives(
    queue: Queue, valkey_url: str, tmp_path: Path
) -> None:
    """``--max-stalled 1``: the first expired lease (a crash) dead-letters the job as
    ``stalled``; the default 3 would have returned it to its lane."""
    verdict = await queue.enqueue({"sleep": 30})
    marker = tmp_path / "started"
    crashing = worker_command(valkey_url, queue.name, "--lease", "0.5", "--beat", "0.1")
    doomed = await asyncio.create_subprocess_exec(*crashing, env=worker_env(marker))
    await until(lambda: _true(marker.exists() and marker.read_text().endswith("\n")))
    doomed.send_signal(signal.SIGKILL)
    assert await doomed.wait() == -signal.SIGKILL
    reaper = await asyncio.create_subprocess_exec(
        *worker_command(valkey_url, queue.name, "--beat", "0.1", "--max-stalled", "1"),
        env=worker_env(tmp_path / "unused"),
    )
    try:
        await until(lambda: _state_is(queue, verdict.id, "dead"))
    finally:
        reaper.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(reaper.wait(), 10) == 0
    info = await queue.job(verdict.id)
    assert info is not None
    assert (info.last_error, info.stalled) == ("stalled", 1)

"""Consumers on the embedded server: latency, drain, pool width, and the peer queues side by side.

Run: ``.venv/bin/python bench/consumers.py [--runs 3] [--jobs 20000] [--no-peers] [--url …]``.
The peers (arq, SAQ, taskiq-redis) come with ``pip install -e '.[bench]'``. Each figure is the
median of ``--runs`` runs, the systems interleaved within a run so noise hits them alike:

1. latency: enqueue → handler start at a steady 200 jobs/s for 5 s, consumers parked
   (concurrency 10); producer and consumer in this process, each on its own pool;
2. drain: ``--jobs`` pre-enqueued no-op jobs, concurrency 50, one process, timed from the
   consumer's start to the last completion (an in-process counter, polled every 2 ms);
3. pool width: N consumers (concurrency 10 each) through one socket vs an N-wide pool;
4. peers: the same drain and latency, each peer in its own fastest documented path.

Every system gets its own fresh queue name (key prefix) and deletes only its own keys. A latency
run ends once every offered job has completed. The default run takes ~9 min on a 2-core host,
two thirds of it the peers enqueueing and draining their backlogs one job at a time;
``--no-peers`` takes ~3 min.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from _harness import serve
from echomq import Consumer, ConsumerOptions, Item, Job, Queue
from echomq.consumers import Worker, WorkerOptions

RATE = 200.0  # jobs/s offered in the latency test
SECONDS = 5.0  # how long the latency test offers them
PARKED_CONCURRENCY = 10
DRAIN_CONCURRENCY = 50
BATCH = 50
WIDTHS = (1, 2, 4, 8)
ARQ_POLL = 0.01  # seconds; arq's default poll_delay (0.5 s) is its latency floor
SENDERS = 50  # concurrent enqueuers for a peer's backlog when it has no bulk API

Samples = list[float]


def fresh(kind: str) -> str:
    return f"bench-{kind}-{time.time_ns()}"


def redis_url(url: str) -> str:
    """The peers' clients (redis-py) know only the redis:// spelling of the same address."""
    return url.replace("valkey://", "redis://", 1).replace("valkeys://", "rediss://", 1)


async def reached(count: Callable[[], int], target: int, running: asyncio.Future[Any]) -> float:
    """Poll an in-process completion counter; the perf_counter at which it reached ``target``."""
    deadline = time.perf_counter() + max(120.0, target / 100)
    while count() < target:
        if running.done():
            running.result()  # the worker's own error, if it raised one
            raise RuntimeError(f"the worker stopped with {count()} of {target} done")
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{count()} of {target} done after {max(120, target // 100)} s")
        await asyncio.sleep(0.002)
    return time.perf_counter()


async def paced(send: Callable[[float], Awaitable[object]]) -> int:
    """Offer ``RATE`` jobs/s for ``SECONDS``, each carrying its enqueue instant; the count."""
    total = round(RATE * SECONDS)
    start = time.perf_counter()
    for n in range(total):
        ahead = start + n / RATE - time.perf_counter()
        if ahead > 0:
            await asyncio.sleep(ahead)
        await send(time.perf_counter())
    return total


async def admitted(jobs: int, send: Callable[[int], Awaitable[object]]) -> None:
    """Pre-enqueue through ``SENDERS`` concurrent tasks (peers without a bulk enqueue)."""

    async def sender(first: int) -> None:
        for n in range(first, jobs, SENDERS):
            await send(n)

    await asyncio.gather(*(sender(k) for k in range(SENDERS)))


async def stopped(running: asyncio.Future[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        await running


class System(Protocol):
    label: str
    path: str

    async def drain(self, jobs: int) -> float: ...

    async def latency(self) -> Samples: ...


# -- echomq ------------------------------------------------------------------------------------


async def noop(job: Job) -> None:
    return None


class EchoMQ:
    def __init__(self, url: str, batch: int | None = None) -> None:
        self.url = url
        self.batch = batch
        self.label = "echomq" if batch is None else f"echomq batch={batch}"
        self.path = (
            "Worker, 1 consumer, default options (claims its free slots per call), pool of 2"
            if batch is None
            else f"Worker, 1 consumer, up to {batch} jobs per claim, pool of 2"
        )

    async def drain(self, jobs: int) -> float:
        return await self.drain_through(jobs, 1, DRAIN_CONCURRENCY, pool_size=2)

    async def drain_through(
        self, jobs: int, consumers: int, concurrency: int, pool_size: int
    ) -> float:
        name = fresh("echomq")
        producer = await Queue.connect(self.url, name, pool_size=1)
        try:
            for start in range(0, jobs, 1000):
                await producer.enqueue_many(
                    [Item(n) for n in range(start, min(jobs, start + 1000))]
                )
            queue = await Queue.connect(self.url, name, pool_size=pool_size)
            options = ConsumerOptions(concurrency=concurrency, batch=self.batch)
            worker = Worker(queue, noop, options, WorkerOptions(consumers=consumers))
            start = time.perf_counter()
            running = asyncio.ensure_future(worker.run())
            try:
                end = await reached(lambda: worker.tally().completed, jobs, running)
            finally:
                worker.stop()
                await running
                await queue.close()
        finally:
            await producer.pause()
            await producer.obliterate(force=True)
            await producer.close()
        return jobs / (end - start)

    async def latency(self) -> Samples:
        name = fresh("echomq")
        samples: Samples = []

        async def record(job: Job) -> None:
            samples.append(time.perf_counter() - job.payload)

        producer = await Queue.connect(self.url, name, pool_size=1)
        queue = await Queue.connect(self.url, name, pool_size=2)
        consumer = Consumer(queue, record, ConsumerOptions(concurrency=PARKED_CONCURRENCY))
        running = asyncio.ensure_future(consumer.run())
        try:
            await asyncio.sleep(0.2)  # parked on the wake list before the first job
            total = await paced(producer.enqueue)
            await reached(lambda: consumer.tally.completed, total, running)
        finally:
            consumer.stop()
            await running
            await queue.close()
            await producer.pause()
            await producer.obliterate(force=True)
            await producer.close()
        return samples


# -- arq ---------------------------------------------------------------------------------------


class Arq:
    label = "arq"
    path = (
        f"arq.worker.Worker(max_jobs=50, burst=True, poll_delay={ARQ_POLL}, keep_result=0); "
        "enqueue_job per job (no bulk API), 50 concurrent senders"
    )

    def __init__(self, url: str) -> None:
        from arq.connections import RedisSettings

        self.settings = RedisSettings.from_dsn(redis_url(url))

    async def _run(
        self, name: str, function: Callable[..., Awaitable[None]], jobs: int | None
    ) -> tuple[Any, asyncio.Future[Any], list[int]]:
        from arq.worker import Worker as ArqWorker
        from arq.worker import func

        done = [0]

        async def finished(ctx: dict[str, Any]) -> None:  # after the job's settle round trip
            done[0] += 1

        worker = ArqWorker(
            functions=[func(function, name="job")],  # type: ignore[arg-type]
            queue_name=name,
            redis_settings=self.settings,
            burst=jobs is not None,
            max_jobs=DRAIN_CONCURRENCY if jobs is not None else PARKED_CONCURRENCY,
            poll_delay=ARQ_POLL,
            keep_result=0,
            handle_signals=False,
            after_job_end=finished,
        )
        return worker, asyncio.ensure_future(worker.async_run()), done

    async def drain(self, jobs: int) -> float:
        from arq import create_pool

        name = fresh("arq")
        producer = await create_pool(self.settings, default_queue_name=name)

        async def job(ctx: dict[str, Any], n: int) -> None:
            return None

        try:
            await admitted(jobs, lambda n: producer.enqueue_job("job", n))
            start = time.perf_counter()
            worker, running, done = await self._run(name, job, jobs)
            try:
                end = await reached(lambda: done[0], jobs, running)
            finally:
                await stopped(running)
                await worker.close()
        finally:
            await producer.delete(name)
            await producer.aclose()
        return jobs / (end - start)

    async def latency(self) -> Samples:
        from arq import create_pool

        name = fresh("arq")
        samples: Samples = []

        async def record(ctx: dict[str, Any], t0: float) -> None:
            samples.append(time.perf_counter() - t0)

        producer = await create_pool(self.settings, default_queue_name=name)
        worker, running, done = await self._run(name, record, None)
        try:
            await asyncio.sleep(0.2)
            total = await paced(lambda t0: producer.enqueue_job("job", t0))
            await reached(lambda: done[0], total, running)  # close() cancels unsettled jobs
        finally:
            await worker.close()  # cancels its main task
            await stopped(running)
            await producer.delete(name)
            await producer.aclose()
        return samples


# -- SAQ ---------------------------------------------------------------------------------------


class Saq:
    label = "SAQ"
    path = (
        "saq.Queue.from_url + saq.Worker(concurrency=50), BLMOVE per job, sweep lock taken first; "
        "enqueue per job with ttl=-1 (no bulk API), 50 concurrent senders"
    )

    def __init__(self, url: str) -> None:
        self.url = redis_url(url)
        # Stopping a worker cancels the BLMOVEs it has parked: SAQ warns about that on each stop.
        logging.getLogger("saq").setLevel(logging.ERROR)

    async def _queues(self, name: str) -> tuple[Any, Any]:
        from saq import Queue as SaqQueue

        producer = SaqQueue.from_url(self.url, name=name)
        queue = SaqQueue.from_url(self.url, name=name)
        await producer.connect()
        await queue.connect()
        return producer, queue

    async def _close(self, producer: Any, queue: Any, name: str) -> None:
        for pattern in (f"saq:{name}:*", f"saq:job:{name}:*"):
            keys = [key async for key in producer.redis.scan_iter(match=pattern)]
            if keys:
                await producer.redis.delete(*keys)
        await queue.disconnect()
        await producer.disconnect()

    async def drain(self, jobs: int) -> float:
        from saq import Worker as SaqWorker

        name = fresh("saq")
        producer, queue = await self._queues(name)

        async def job(ctx: dict[str, Any], *, n: int) -> None:
            return None

        try:
            await admitted(jobs, lambda n: producer.enqueue("job", n=n, ttl=-1))
            # A worker sweeps the active list as it starts, racing its own first dequeues: a job
            # moved to active but not yet marked active is aborted as "swept". A sweep now (active
            # is empty) takes the 60 s sweep lock, as a worker already running would hold it.
            await queue.sweep()
            worker = SaqWorker(queue, [("job", job)], concurrency=DRAIN_CONCURRENCY)
            start = time.perf_counter()
            running = asyncio.ensure_future(worker.start())
            try:
                end = await reached(lambda: queue.complete, jobs, running)
            finally:
                await worker.stop()
                await stopped(running)
        finally:
            await self._close(producer, queue, name)
        return jobs / (end - start)

    async def latency(self) -> Samples:
        from saq import Worker as SaqWorker

        name = fresh("saq")
        producer, queue = await self._queues(name)
        samples: Samples = []

        async def record(ctx: dict[str, Any], *, t0: float) -> None:
            samples.append(time.perf_counter() - t0)

        worker = SaqWorker(queue, [("job", record)], concurrency=PARKED_CONCURRENCY)
        running = asyncio.ensure_future(worker.start())
        try:
            await asyncio.sleep(0.2)
            total = await paced(lambda t0: producer.enqueue("job", t0=t0, ttl=-1))
            await reached(lambda: queue.complete, total, running)
        finally:
            await worker.stop()
            await stopped(running)
            await self._close(producer, queue, name)
        return samples


# -- taskiq-redis ------------------------------------------------------------------------------


class Taskiq:
    label = "taskiq-redis"
    path = (
        "ListQueueBroker + taskiq.api.run_receiver_task(max_async_tasks=50), BRPOP per job, "
        "no ack; kiq per job (no bulk API), 50 concurrent senders"
    )

    def __init__(self, url: str) -> None:
        self.url = redis_url(url)
        # The receiver logs a warning when its task is cancelled, which is how it is stopped.
        logging.getLogger("taskiq").setLevel(logging.ERROR)

    async def _brokers(
        self, function: Callable[..., Awaitable[None]]
    ) -> tuple[Any, Any, Any, list[int]]:
        from taskiq import TaskiqMiddleware
        from taskiq_redis import ListQueueBroker

        done = [0]

        class Completed(TaskiqMiddleware):
            def post_save(self, message: Any, result: Any) -> None:
                done[0] += 1

        name = fresh("taskiq")
        broker = ListQueueBroker(self.url, queue_name=name).with_middlewares(Completed())
        producer = ListQueueBroker(self.url, queue_name=name)
        broker.register_task(function, task_name="job")
        task = producer.register_task(function, task_name="job")
        await producer.startup()
        await broker.startup()
        return broker, producer, task, done

    async def _close(self, broker: Any, producer: Any) -> None:
        from redis.asyncio import Redis

        async with Redis(connection_pool=producer.connection_pool) as client:
            await client.delete(producer.queue_name)
        await broker.shutdown()
        await producer.shutdown()

    def _receive(self, broker: Any, concurrency: int) -> asyncio.Future[None]:
        from taskiq.api import run_receiver_task

        return asyncio.ensure_future(run_receiver_task(broker, max_async_tasks=concurrency))

    async def drain(self, jobs: int) -> float:
        async def job(n: int) -> None:
            return None

        broker, producer, task, done = await self._brokers(job)
        try:
            await admitted(jobs, task.kiq)
            start = time.perf_counter()
            running = self._receive(broker, DRAIN_CONCURRENCY)
            try:
                end = await reached(lambda: done[0], jobs, running)
            finally:
                running.cancel()
                await stopped(running)
        finally:
            await self._close(broker, producer)
        return jobs / (end - start)

    async def latency(self) -> Samples:
        samples: Samples = []

        async def record(t0: float) -> None:
            samples.append(time.perf_counter() - t0)

        broker, producer, task, done = await self._brokers(record)
        running = self._receive(broker, PARKED_CONCURRENCY)
        try:
            await asyncio.sleep(0.2)
            total = await paced(task.kiq)
            await reached(lambda: done[0], total, running)
        finally:
            running.cancel()
            await stopped(running)
            await self._close(broker, producer)
        return samples


PEERS: dict[str, Callable[[str], System]] = {"arq": Arq, "SAQ": Saq, "taskiq-redis": Taskiq}


# -- the runs and the tables -------------------------------------------------------------------


class Figures:
    """Per label, the value of each run; for a peer that broke, why it has none."""

    def __init__(self) -> None:
        self.values: dict[str, list[Any]] = {}
        self.failures: dict[str, str] = {}

    async def take(self, label: str, measure: Callable[[], Awaitable[Any]], *, peer: bool) -> None:
        if label in self.failures:
            return
        try:
            value = await measure()
        except Exception as exc:
            if not peer:
                raise  # echomq's own failure is a bug to see, not a cell to fill
            self.failures[label] = f"{type(exc).__name__}: {exc}"[:100]
            return
        self.values.setdefault(label, []).append(value)

    def median(self, label: str, index: int | None = None) -> float | None:
        rows = self.values.get(label)
        if label in self.failures or not rows:
            return None
        return statistics.median(row if index is None else row[index] for row in rows)

    def cell(self, label: str, value: float | None, spec: str) -> str:
        return "n/a" if value is None else format(value, spec)


def percentiles(samples: Samples) -> tuple[float, float]:
    """p50 and p99 in ms."""
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples) * 1e3, cuts[98] * 1e3


async def latency_of(system: System) -> tuple[float, float]:
    return percentiles(await system.latency())


def ratio(mine: float | None, theirs: float | None) -> str:
    return "—" if mine is None or theirs is None else f"{mine / theirs:.2f}×"


async def run(url: str, runs: int, jobs: int, peers: bool) -> None:
    single, batched, one = EchoMQ(url), EchoMQ(url, batch=BATCH), EchoMQ(url, batch=1)
    others: list[System] = [make(url) for make in PEERS.values()] if peers else []
    latency, drain, width = Figures(), Figures(), Figures()
    began = time.perf_counter()
    for r in range(runs):
        for system in (single, *others):
            await latency.take(system.label, lambda s=system: latency_of(s), peer=is_peer(system))
        for system in (single, batched, one, *others):
            await drain.take(system.label, lambda s=system: s.drain(jobs), peer=is_peer(system))
        for n in WIDTHS:
            for pool in sorted({1, n}):  # one consumer: both columns are the same run
                await width.take(
                    f"{n}/{pool}",
                    lambda n=n, pool=pool: one.drain_through(jobs, n, 10, pool_size=pool),
                    peer=False,
                )
        elapsed = time.perf_counter() - began
        print(f"run {r + 1} of {runs} done at {elapsed:.0f} s", file=sys.stderr, flush=True)
    report(jobs, runs, (single, batched, one), others, latency, drain, width)


def is_peer(system: System) -> bool:
    return not isinstance(system, EchoMQ)


def report(
    jobs: int,
    runs: int,
    mine: tuple[EchoMQ, EchoMQ, EchoMQ],
    others: list[System],
    latency: Figures,
    drain: Figures,
    width: Figures,
) -> None:
    single, batched, _one = mine
    print(f"\n{jobs} jobs per drain, median of {runs} runs.\n")
    print(
        f"### 1. Latency, enqueue → handler start: {RATE:.0f} jobs/s for {SECONDS:.0f} s, "
        f"a parked consumer of concurrency {PARKED_CONCURRENCY}\n"
    )
    p50, p99 = latency.median(single.label, 0), latency.median(single.label, 1)
    print("| queue | p50 ms | p99 ms |\n|---|---:|---:|")
    print(f"| echomq | {latency.cell('', p50, '.2f')} | {latency.cell('', p99, '.2f')} |")

    print(f"\n### 2. Drain, concurrency {DRAIN_CONCURRENCY}, one process\n")
    print("| mode | jobs/s |\n|---|---:|")
    for system in mine:
        print(f"| {system.path} | {drain.cell('', drain.median(system.label), ',.0f')} |")

    print("\n### 3. Pool width: N consumers × concurrency 10 in one process, claim one per call\n")
    print("| consumers | pool of 1, jobs/s | pool of N, jobs/s | pool of N ÷ pool of 1 |")
    print("|---:|---:|---:|---:|")
    for n in WIDTHS:
        one, wide = width.median(f"{n}/1"), width.median(f"{n}/{n}")
        print(f"| {n} | {one:,.0f} | {wide:,.0f} | {ratio(wide, one)} |")

    if not others:
        return
    base, best = drain.median(single.label), drain.median(batched.label)
    print("\n### 4. Peers on the same server, same drain and latency (ratios: echomq ÷ peer)\n")
    print(
        "| queue | drain jobs/s | echomq ÷ peer | echomq batch ÷ peer "
        "| p50 ms | p99 ms | p50 echomq ÷ peer | p99 echomq ÷ peer |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| echomq | {base:,.0f} | — | — | {p50:.2f} | {p99:.2f} | — | — |")
    print(f"| echomq batch={BATCH} | {best:,.0f} | — | — | — | — | — | — |")
    for system in others:
        label = system.label
        rate = drain.median(label)
        lat50, lat99 = latency.median(label, 0), latency.median(label, 1)
        drained = (
            f"n/a ({drain.failures[label]}) | — | —"
            if label in drain.failures
            else f"{rate:,.0f} | {ratio(base, rate)} | {ratio(best, rate)}"
        )
        waited = (
            f"n/a ({latency.failures[label]}) | — | — | —"
            if label in latency.failures
            else f"{lat50:.2f} | {lat99:.2f} | {ratio(p50, lat50)} | {ratio(p99, lat99)}"
        )
        print(f"| {label} | {drained} | {waited} |")
    print("\nHow each ran (drain; the latency run is the same at concurrency 10, no burst):\n")
    for system in (*mine, *others):
        print(f"* {system.label}: {system.path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--peers", action=argparse.BooleanOptionalAction, default=True)
    return serve(parser, lambda url, args: run(url, args.runs, args.jobs, args.peers))


if __name__ == "__main__":
    sys.exit(main())

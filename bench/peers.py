"""echomq against seven peer queues on one server: enqueue, drain and latency side by side.

Run: ``.venv/bin/python bench/peers.py [--runs 3] [--jobs 5000] [--only RQ,huey] [--url …]``.
The peers come with ``pip install -e '.[bench]'``. Every system runs in this process against
the same server, each in a database of its own (echomq 0, the peers 1–7), flushed after every
trial: with ``--url``, point it at a server whose databases 0–7 may be emptied. A no-op handler
everywhere; per figure the median of ``--runs`` runs, with min and max, the systems interleaved
within each run so the host's load falls on all of them alike.

* **enqueue** (jobs/s): ``--jobs`` jobs, one call per job, each peer's documented producer call.
  The blocking peers (RQ, Dramatiq, huey, Celery) from one thread, against echomq's
  ``SyncQueue.enqueue`` from one thread; the asyncio peers (arq, SAQ, taskiq-redis) from 50
  concurrent tasks, against echomq's ``Queue.enqueue`` from 50 tasks. Bulk APIs where a peer has
  one (echomq ``enqueue_many``, RQ ``Queue.enqueue_many``) in a column of their own.
* **drain** (jobs/s): those ``--jobs`` jobs waiting, then the peer's own worker loop started and
  timed from its start to the last handler's return (an in-process counter).
* **latency** (ms): enqueue → handler start at a steady 200 jobs/s for 5 s, the worker parked
  before the first job; p50 and p99 (the producer's ``perf_counter`` in the payload, read by the
  handler in the same process).

The asyncio peers' drain and latency are bench/consumers.py's (the same code, so the same
settings); their enqueue figure is the admission that precedes their drain, timed here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import valkey

import _peer_tasks
import consumers
from consumers import DRAIN_CONCURRENCY, RATE, SECONDS, SENDERS
from echomq import ConnectionOptions, Item, Queue, SyncQueue
from echomq.server import EmbeddedValkey

Samples = list[float]
THREADS = 8  # Dramatiq's default worker_threads; huey's consumer given the same
QUEUE = "bench"


def db_url(url: str, db: int) -> str:
    """The same server, database ``db`` (the redis:// spelling every peer's client reads)."""
    options = ConnectionOptions.from_url(url)
    auth = f":{options.password}@" if options.password else ""
    return f"redis://{auth}{options.host}:{options.port}/{db}"


def flush(url: str) -> None:
    with contextlib.closing(valkey.Valkey.from_url(url)) as client:
        client.flushdb()


def timed(jobs: int, send: Callable[[int], object]) -> float:
    start = time.perf_counter()
    for n in range(jobs):
        send(n)
    return jobs / (time.perf_counter() - start)


def waited(target: int, alive: Callable[[], bool] = lambda: True) -> float:
    """Poll the handlers' counter until it reaches ``target``; the perf_counter then."""
    deadline = time.perf_counter() + max(120.0, target / 50)
    while _peer_tasks.done[0] < target:
        if time.perf_counter() > deadline or not alive():
            raise RuntimeError(f"{_peer_tasks.done[0]} of {target} done")
        time.sleep(0.002)
    return time.perf_counter()


def paced(send: Callable[[float], object]) -> int:
    """Offer ``RATE`` jobs/s for ``SECONDS`` from this thread, each carrying its instant."""
    total = round(RATE * SECONDS)
    start = time.perf_counter()
    for n in range(total):
        ahead = start + n / RATE - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)
        send(time.perf_counter())
    return total


@contextlib.contextmanager
def signals_kept() -> Iterator[None]:
    """Consumers that install signal handlers (huey) get them undone afterwards."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


class Peer(Protocol):
    label: str
    path: str
    mode: str  # "sync" or "async": which echomq enqueue it is compared with

    def trial(self, jobs: int) -> tuple[float, float, float | None]:
        """(enqueue jobs/s, drain jobs/s, bulk enqueue jobs/s or None)."""
        ...

    def latency(self) -> Samples: ...


# -- echomq ------------------------------------------------------------------------------------


class EchoMQ:
    label = "echomq"
    mode = "both"
    path = (
        "enqueue: SyncQueue.enqueue from one thread, and Queue.enqueue from 50 tasks; bulk: "
        "enqueue_many in chunks of 1,000; drain: Worker, 1 consumer of concurrency 50, default "
        "options (claims its free slots per call), pool of 2, in this process"
    )

    def __init__(self, url: str) -> None:
        self.url = db_url(url, 0).replace("redis://", "valkey://", 1)
        self.inner = consumers.EchoMQ(self.url)

    def enqueues(self, jobs: int) -> tuple[float, float, float]:
        """(SyncQueue one thread, Queue 50 tasks, enqueue_many), each on a fresh queue."""
        try:
            sync = SyncQueue.connect(self.url, consumers.fresh("echomq"))
            try:
                one = timed(jobs, lambda n: sync.enqueue(n))
            finally:
                sync.close()
            flush(self.url)

            async def concurrent() -> tuple[float, float]:
                queue = await Queue.connect(self.url, consumers.fresh("echomq"), pool_size=1)
                try:
                    start = time.perf_counter()
                    await consumers.admitted(jobs, queue.enqueue)
                    fifty = jobs / (time.perf_counter() - start)
                    start = time.perf_counter()
                    for first in range(0, jobs, 1000):
                        await queue.enqueue_many(
                            [Item(n) for n in range(first, min(jobs, first + 1000))]
                        )
                    bulk = jobs / (time.perf_counter() - start)
                finally:
                    await queue.close()
                return fifty, bulk

            fifty, bulk = asyncio.run(concurrent())
        finally:
            flush(self.url)
        return one, fifty, bulk

    def drain(self, jobs: int) -> float:
        try:
            return asyncio.run(self.inner.drain(jobs))
        finally:
            flush(self.url)

    def latency(self) -> Samples:
        try:
            return asyncio.run(self.inner.latency())
        finally:
            flush(self.url)


# -- the blocking peers ------------------------------------------------------------------------


class Rq:
    label = "RQ"
    mode = "sync"
    path = (
        "rq.Queue.enqueue per job (defaults: results kept 500 s); bulk: Queue.enqueue_many "
        "(one pipeline); drain: rq.SimpleWorker.work(burst=True) in this process (one job at a "
        "time, no fork: `rq worker --burst --worker-class rq.SimpleWorker`), logging at WARNING"
    )

    def __init__(self, url: str, db: int) -> None:
        self.url = db_url(url, db)

    def _worker(self, queue: Any) -> Any:
        from rq import SimpleWorker

        worker = SimpleWorker([queue], connection=queue.connection)
        worker._install_signal_handlers = lambda: None  # not the host's Ctrl-C
        return worker

    def trial(self, jobs: int) -> tuple[float, float, float | None]:
        from redis import Redis
        from rq import Queue as RqQueue

        redis = Redis.from_url(self.url)
        try:
            queue = RqQueue(QUEUE, connection=redis)
            _peer_tasks.reset()
            enqueue = timed(jobs, lambda n: queue.enqueue(_peer_tasks.noop, n))
            worker = self._worker(queue)
            start = time.perf_counter()
            worker.work(burst=True, logging_level="WARNING")
            end = time.perf_counter()
            if _peer_tasks.done[0] != jobs:
                raise RuntimeError(f"{_peer_tasks.done[0]} of {jobs} done")
            redis.flushdb()
            start_bulk = time.perf_counter()
            with redis.pipeline() as pipe:
                data = [RqQueue.prepare_data(_peer_tasks.noop, (n,)) for n in range(jobs)]
                queue.enqueue_many(data, pipeline=pipe)
                pipe.execute()
            bulk = jobs / (time.perf_counter() - start_bulk)
        finally:
            redis.flushdb()
            redis.close()
        return enqueue, jobs / (end - start), bulk

    def latency(self) -> Samples:
        from redis import Redis
        from rq import Queue as RqQueue

        redis = Redis.from_url(self.url)
        try:
            queue = RqQueue(QUEUE, connection=redis)
            _peer_tasks.reset()
            worker = self._worker(queue)
            total = round(RATE * SECONDS)

            def produce() -> None:
                time.sleep(0.2)  # the worker parked in its BLMOVE first
                paced(lambda t0: queue.enqueue(_peer_tasks.timed, t0))

            producer = threading.Thread(target=produce)
            producer.start()
            worker.work(max_jobs=total, logging_level="WARNING")
            producer.join()
            return list(_peer_tasks.samples)
        finally:
            redis.flushdb()
            redis.close()


class Dramatiq:
    label = "Dramatiq"
    mode = "sync"
    path = (
        f"RedisBroker, actor.send per job; drain: dramatiq.Worker(worker_threads={THREADS}) "
        "in this process (the default thread count; the `dramatiq` CLI would add one such "
        "process per core), default middleware, max_retries=0"
    )

    def __init__(self, url: str, db: int) -> None:
        self.url = db_url(url, db)
        logging.getLogger("dramatiq").setLevel(logging.WARNING)

    def _setup(self, fn: Callable[..., None]) -> tuple[Any, Any]:
        import dramatiq
        from dramatiq.brokers.redis import RedisBroker

        broker = RedisBroker(url=self.url)
        dramatiq.set_broker(broker)
        actor = dramatiq.actor(fn, broker=broker, queue_name=QUEUE, max_retries=0)
        return broker, actor

    def _run(self, broker: Any, target: int) -> float:
        from dramatiq import Worker as DramatiqWorker

        worker = DramatiqWorker(broker, worker_threads=THREADS)
        start = time.perf_counter()
        worker.start()
        try:
            end = waited(target)
        finally:
            worker.stop()
        return end - start

    def trial(self, jobs: int) -> tuple[float, float, float | None]:
        broker, actor = self._setup(_peer_tasks.noop)
        try:
            _peer_tasks.reset()
            enqueue = timed(jobs, actor.send)
            return enqueue, jobs / self._run(broker, jobs), None
        finally:
            broker.close()
            flush(self.url)

    def latency(self) -> Samples:
        from dramatiq import Worker as DramatiqWorker

        broker, actor = self._setup(_peer_tasks.timed)
        try:
            _peer_tasks.reset()
            worker = DramatiqWorker(broker, worker_threads=THREADS)
            worker.start()
            try:
                time.sleep(0.2)
                waited(paced(actor.send))
            finally:
                worker.stop()
            return list(_peer_tasks.samples)
        finally:
            broker.close()
            flush(self.url)


class Huey:
    label = "huey"
    mode = "sync"
    path = (
        f"RedisHuey(results=False), calling the task per job; drain: its Consumer (workers="
        f"{THREADS}, worker_type='thread', periodic off) in this process, BRPOP with its "
        "default 1 s read timeout"
    )

    def __init__(self, url: str, db: int) -> None:
        self.url = db_url(url, db)
        logging.getLogger("huey").setLevel(logging.WARNING)

    def _setup(self, fn: Callable[..., None]) -> tuple[Any, Any]:
        from huey import RedisHuey

        huey = RedisHuey(QUEUE, url=self.url, results=False)
        return huey, huey.task()(fn)

    @contextlib.contextmanager
    def _consumer(self, huey: Any) -> Iterator[None]:
        consumer = huey.create_consumer(workers=THREADS, worker_type="thread", periodic=False)
        with signals_kept():
            consumer.start()
            try:
                yield
            finally:
                consumer.stop(graceful=True)

    def trial(self, jobs: int) -> tuple[float, float, float | None]:
        huey, task = self._setup(_peer_tasks.noop)
        try:
            _peer_tasks.reset()
            enqueue = timed(jobs, task)
            start = time.perf_counter()
            with self._consumer(huey):
                end = waited(jobs)
            return enqueue, jobs / (end - start), None
        finally:
            flush(self.url)

    def latency(self) -> Samples:
        huey, task = self._setup(_peer_tasks.timed)
        try:
            _peer_tasks.reset()
            with self._consumer(huey):
                time.sleep(0.2)
                waited(paced(task))
            return list(_peer_tasks.samples)
        finally:
            flush(self.url)


class Celery:
    label = "Celery"
    mode = "sync"
    path = (
        "redis broker, task.delay per job, task_ignore_result; drain: one worker, pool=solo, "
        "concurrency 1 (the default prefetch of 4), in a thread of this process "
        "(celery.contrib.testing.worker.start_worker: the WorkController `celery worker "
        "--pool=solo` runs, without mingle, gossip and heartbeat)"
    )

    def __init__(self, url: str, db: int) -> None:
        self.url = db_url(url, db)
        for name in ("celery", "kombu"):
            logging.getLogger(name).setLevel(logging.WARNING)

    def _setup(self, fn: Callable[..., None]) -> tuple[Any, Any]:
        from celery import Celery as CeleryApp

        # A fresh app per trial: kombu caches queue declarations, which FLUSHDB removes.
        app = CeleryApp("bench", broker=self.url, set_as_current=False)
        app.conf.update(
            task_ignore_result=True,
            task_default_queue=QUEUE,
            broker_connection_retry_on_startup=True,
            worker_hijack_root_logger=False,
        )
        return app, app.task(name=fn.__name__, shared=False)(fn)  # shared: every later app

    @contextlib.contextmanager
    def _worker(self, app: Any) -> Iterator[None]:
        from celery.contrib.testing.worker import start_worker

        with start_worker(
            app,
            pool="solo",
            concurrency=1,
            perform_ping_check=False,
            loglevel="WARNING",
            shutdown_timeout=60,
        ):
            yield

    def trial(self, jobs: int) -> tuple[float, float, float | None]:
        app, task = self._setup(_peer_tasks.noop)
        try:
            _peer_tasks.reset()
            enqueue = timed(jobs, task.delay)
            start = time.perf_counter()
            with self._worker(app):
                end = waited(jobs)
            return enqueue, jobs / (end - start), None
        finally:
            app.close()
            flush(self.url)

    def latency(self) -> Samples:
        app, task = self._setup(_peer_tasks.timed)
        try:
            _peer_tasks.reset()
            with self._worker(app):
                time.sleep(0.2)
                waited(paced(task.delay))
            return list(_peer_tasks.samples)
        finally:
            app.close()
            flush(self.url)


# -- the asyncio peers, through bench/consumers.py ---------------------------------------------


class Async:
    """An asyncio peer of bench/consumers.py; its admission (``SENDERS`` tasks) is timed."""

    mode = "async"

    def __init__(self, make: Callable[[str], Any], url: str, db: int) -> None:
        self.url = db_url(url, db)
        self.inner = make(self.url)
        self.label = self.inner.label
        self.path = self.inner.path

    def trial(self, jobs: int) -> tuple[float, float, float | None]:
        clock: list[float] = []
        admitted = consumers.admitted

        async def clocked(jobs: int, send: Callable[[int], Any]) -> None:
            start = time.perf_counter()
            await admitted(jobs, send)
            clock.append(jobs / (time.perf_counter() - start))

        consumers.admitted = clocked  # the peer's drain looks the name up as it runs
        try:
            drain = asyncio.run(self.inner.drain(jobs))
        finally:
            consumers.admitted = admitted
            flush(self.url)
        return clock[0], drain, None

    def latency(self) -> Samples:
        try:
            return asyncio.run(self.inner.latency())
        finally:
            flush(self.url)


PEERS: dict[str, Callable[[str, int], Peer]] = {
    "RQ": Rq,
    "Dramatiq": Dramatiq,
    "huey": Huey,
    "Celery": Celery,
    "arq": lambda url, db: Async(consumers.Arq, url, db),
    "SAQ": lambda url, db: Async(consumers.Saq, url, db),
    "taskiq-redis": lambda url, db: Async(consumers.Taskiq, url, db),
}


# -- the runs and the table --------------------------------------------------------------------


class Figures:
    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}
        self.failures: dict[str, str] = {}

    def add(self, key: str, value: float | None) -> None:
        if value is not None:
            self.values.setdefault(key, []).append(value)

    def take(self, label: str, measure: Callable[[], Any]) -> Any:
        if label in self.failures:
            return None
        try:
            return measure()
        except Exception as exc:
            self.failures[label] = f"{type(exc).__name__}: {exc}"[:120]
            print(f"{label} failed: {self.failures[label]}", file=sys.stderr, flush=True)
            return None

    def median(self, key: str) -> float | None:
        rows = self.values.get(key)
        return statistics.median(rows) if rows else None

    def cell(self, key: str, spec: str) -> str:
        rows = self.values.get(key)
        if not rows:
            return "n/a"
        mid = format(statistics.median(rows), spec)
        if len(rows) == 1:
            return mid
        return f"{mid} ({format(min(rows), spec)}–{format(max(rows), spec)})"


def percentiles(samples: Samples) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return statistics.median(samples) * 1e3, cuts[98] * 1e3


def ratio(mine: float | None, theirs: float | None, *, lower_is_better: bool = False) -> str:
    if mine is None or theirs is None:
        return "—"
    return f"{(theirs / mine if lower_is_better else mine / theirs):.2f}×"


def run(url: str, runs: int, jobs: int, only: list[str]) -> None:
    mine = EchoMQ(url)
    others = [PEERS[name](url, db) for db, name in enumerate(PEERS, 1) if name in only]
    figures = Figures()
    began = time.perf_counter()
    for r in range(runs):
        one, fifty, bulk = mine.enqueues(jobs)
        figures.add("echomq/enqueue-sync", one)
        figures.add("echomq/enqueue-async", fifty)
        figures.add("echomq/bulk", bulk)
        figures.add("echomq/drain", mine.drain(jobs))
        p50, p99 = percentiles(mine.latency())
        figures.add("echomq/p50", p50)
        figures.add("echomq/p99", p99)
        for peer in others:
            result = figures.take(peer.label, lambda p=peer: p.trial(jobs))
            if result is not None:
                figures.add(f"{peer.label}/enqueue", result[0])
                figures.add(f"{peer.label}/drain", result[1])
                figures.add(f"{peer.label}/bulk", result[2])
            samples = figures.take(peer.label, peer.latency)
            if samples:
                p50, p99 = percentiles(samples)
                figures.add(f"{peer.label}/p50", p50)
                figures.add(f"{peer.label}/p99", p99)
        elapsed = time.perf_counter() - began
        print(f"run {r + 1} of {runs} done at {elapsed:.0f} s", file=sys.stderr, flush=True)
    report(jobs, runs, mine, others, figures)


def report(jobs: int, runs: int, mine: EchoMQ, others: list[Peer], figures: Figures) -> None:
    print(
        f"\n{jobs:,} no-op jobs per trial; median (min–max) of {runs} runs. enqueue: one call "
        f"per job, from one thread (sync) or {SENDERS} tasks (async); drain: the backlog by the "
        f"peer's worker; latency: {RATE:.0f} jobs/s for {SECONDS:.0f} s, parked worker. "
        "Ratios are echomq ÷ peer (for latency: peer ÷ echomq, so > 1 favours echomq).\n"
    )
    print(
        "| queue | enqueue jobs/s | echomq ÷ peer | bulk enqueue jobs/s | drain jobs/s "
        "| echomq ÷ peer | p50 ms | p99 ms | p99 peer ÷ echomq |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    drain = figures.median("echomq/drain")
    p99 = figures.median("echomq/p99")
    for mode, what in (("sync", "SyncQueue, 1 thread"), ("async", f"Queue, {SENDERS} tasks")):
        print(
            f"| echomq ({what}) | {figures.cell(f'echomq/enqueue-{mode}', ',.0f')} | — "
            f"| {figures.cell('echomq/bulk', ',.0f')} | {figures.cell('echomq/drain', ',.0f')} "
            f"| — | {figures.cell('echomq/p50', '.2f')} | {figures.cell('echomq/p99', '.2f')} | — |"
        )
    for peer in others:
        name = peer.label
        if name in figures.failures and f"{name}/drain" not in figures.values:
            print(f"| {name} | n/a ({figures.failures[name]}) | | | | | | | |")
            continue
        base = figures.median(f"echomq/enqueue-{peer.mode}")
        print(
            f"| {name} ({peer.mode}) | {figures.cell(f'{name}/enqueue', ',.0f')} "
            f"| {ratio(base, figures.median(f'{name}/enqueue'))} "
            f"| {figures.cell(f'{name}/bulk', ',.0f')} | {figures.cell(f'{name}/drain', ',.0f')} "
            f"| {ratio(drain, figures.median(f'{name}/drain'))} "
            f"| {figures.cell(f'{name}/p50', '.2f')} | {figures.cell(f'{name}/p99', '.2f')} "
            f"| {ratio(p99, figures.median(f'{name}/p99'), lower_is_better=True)} |"
        )
    print(f"\nDrain concurrency: echomq {DRAIN_CONCURRENCY} (asyncio); how each ran:\n")
    for system in (mine, *others):
        print(f"* {system.label}: {system.path}")
    for name, why in figures.failures.items():
        print(f"* {name} failed in a run: {why}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--only", default=",".join(PEERS), help="comma-separated peer names")
    parser.add_argument("--url", help="an existing server instead of the embedded one")
    args = parser.parse_args()
    only = args.only.split(",")
    if args.url:  # not _harness.serve: huey's consumer sets signal handlers (the main thread)
        run(args.url, args.runs, args.jobs, only)
        return 0
    with EmbeddedValkey() as server:
        print(f"embedded valkey {server.version} on {server.host}:{server.port}")
        run(server.url, args.runs, args.jobs, only)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The blocking producer from one thread: ``SyncQueue.enqueue`` one job per call, against the
peer's way (huey: one ``LPUSH`` per job through valkey-py's sync client) on the same server.

Run: ``.venv/bin/python bench/sync_producer.py [--runs 5] [--jobs 20000] [--listener]``. Per
case, the median of ``--runs`` interleaved runs: jobs (or calls) per second and this process's CPU
per call. The threaded case shares one SyncQueue between ``--threads`` threads (CPU is per job
there, each thread opens its socket in the timing). Each run of each case gets a fresh queue.
``PING`` on the SyncQueue's own socket is the floor of any one-call-per-job producer here.
``Task.enqueue_sync`` is what an application calls (Django, Flask, a script): a task of an
``App`` on the same queue, so the row beside ``SyncQueue.enqueue`` is the task layer's own cost
(binding and checking the arguments, the ``{"task", "args"}`` envelope, the handle).
``--no-spin`` turns the reply spin off (:data:`echomq.wire.blocking.SPIN`) to show what it buys.
``--listener`` adds ``enqueue`` and ``enqueue_many`` with a subscriber on the queue's events
channel, so every admission publishes its event (a subscriber that never reads: the server
buffers its messages, and the producer alone pays for them).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import threading
import time
from collections.abc import Callable, Iterator

import valkey

from echomq import App, ConnectionOptions, SyncQueue
from echomq.server import EmbeddedValkey
from echomq.wire import blocking as sync_wire
from echomq.wire.blocking import pack


def _timed(calls: int, run: Callable[[], None]) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return calls / wall, cpu / calls * 1e6


Case = Callable[[SyncQueue], None]


def measure(
    url: str, runs: int, jobs: int, threads: int, listener: bool = False
) -> dict[str, list[tuple[float, float]]]:
    """Each run of each case on a queue of its own (and an empty list for the peer), so every
    run starts from an empty lane; the rows are deleted after the run, outside the timing."""
    options = ConnectionOptions.from_url(url)
    peer = valkey.Valkey(host=options.host, port=options.port, password=options.password)
    ping = pack(("PING",))
    payload = {"task": "bench:add", "args": {"a": 1, "b": 2}}
    huey_list = f"huey.bench-{time.time_ns()}"

    def lpush(_: SyncQueue) -> None:
        push = peer.lpush
        for _ in range(jobs):
            push(huey_list, b'{"task":"bench:add","args":{"a":1,"b":2}}')

    def enqueue(queue: SyncQueue) -> None:
        put = queue.enqueue
        for _ in range(jobs):
            put(payload)

    def task_enqueue_sync(queue: SyncQueue) -> None:
        # The app opens a SyncQueue of its own on the same queue. Its setup (a socket, one id
        # node lease) is inside the timing: a few ms against the seconds of ``jobs`` calls.
        app = App(url, queue=queue.name)

        @app.task(name="bench:add")
        async def add(a: int, b: int) -> int:
            return a + b

        for _ in range(jobs):
            add.enqueue_sync(1, 2)
        app.sync_queue().close()

    def enqueue_many(queue: SyncQueue) -> None:
        queue.enqueue_many([payload] * jobs)

    def threaded(queue: SyncQueue) -> None:
        share = jobs // threads
        workers = [
            threading.Thread(target=lambda: [queue.enqueue(payload) for _ in range(share)])
            for _ in range(threads)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    def floor(queue: SyncQueue) -> None:
        call = queue._process.router.call
        for _ in range(jobs):
            call(None, ping)

    cases: dict[str, Case] = {
        "huey-style LPUSH (valkey-py sync)": lpush,
        "SyncQueue.enqueue": enqueue,
        "Task.enqueue_sync (the task layer)": task_enqueue_sync,
        "SyncQueue.enqueue_many": enqueue_many,
        f"SyncQueue.enqueue, {threads} threads (a socket each)": threaded,
        "PING on the SyncQueue's socket": floor,
    }
    heard: dict[str, Case] = {
        "SyncQueue.enqueue, a subscriber listening": enqueue,
        "SyncQueue.enqueue_many, a subscriber listening": enqueue_many,
    }
    listened = set(heard) if listener else set()
    if listener:
        cases.update(heard)
    rows: dict[str, list[tuple[float, float]]] = {case: [] for case in cases}
    for n in range(runs + 1):  # the first round warms up and is not counted
        for case, run in cases.items():
            name = f"bench-sync-{time.time_ns()}"
            with SyncQueue.connect(url, name) as queue, _subscriber(peer, queue, case in listened):
                queue.enqueue("warm")  # the script loaded, the id node leased, listeners asked
                timed = _timed(jobs, functools.partial(run, queue))
                if n:
                    rows[case].append(timed)
            peer.delete(huey_list)
            for keys in _batches(peer.scan_iter(f"emq:{{{name}}}:*", count=1000)):
                peer.unlink(*keys)
    peer.close()
    return rows


@contextlib.contextmanager
def _subscriber(peer: valkey.Valkey, queue: SyncQueue, listens: bool) -> Iterator[None]:
    """A subscriber of ``queue``'s events channel, confirmed before the queue asks for one."""
    if not listens:
        yield
        return
    pubsub = peer.pubsub()
    try:
        pubsub.subscribe(queue.keys.events)
        assert pubsub.get_message(timeout=5) is not None  # the confirmation: it is counted
        yield
    finally:
        pubsub.close()


def _batches(keys: Iterator[bytes], size: int = 1000) -> Iterator[list[bytes]]:
    batch: list[bytes] = []
    for key in keys:
        batch.append(key)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=4, help="threads of the threaded case")
    parser.add_argument("--url", help="an existing server instead of the embedded one")
    parser.add_argument("--no-spin", action="store_true", help="block at once for each reply")
    parser.add_argument("--listener", action="store_true", help="add cases with a subscriber")
    args = parser.parse_args()
    if args.no_spin:
        sync_wire.SPIN = 0.0  # read by each link as it opens
    if args.url:
        rows = measure(args.url, args.runs, args.jobs, args.threads, args.listener)
    else:
        with EmbeddedValkey() as server:
            print(f"embedded valkey {server.version} on {server.host}:{server.port}")
            rows = measure(server.url, args.runs, args.jobs, args.threads, args.listener)
    spin = "off" if args.no_spin else f"{sync_wire.SPIN * 1e6:.0f} µs"
    print(f"\n{args.jobs} calls from one thread, median of {args.runs} runs (reply spin {spin})\n")
    print("| case | jobs/s | client CPU µs/call | runs (jobs/s) |")
    print("|---|---:|---:|---|")
    for case, samples in rows.items():
        rate = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        spread = ", ".join(f"{s[0]:,.0f}" for s in samples)
        print(f"| {case} | {rate:,.0f} | {cpu:.1f} | {spread} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

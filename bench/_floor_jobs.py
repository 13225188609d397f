"""The job body every side of ``bench/floor.py`` runs, and the framework-less floor's worker.

The body is a tiny async function that appends ``time.monotonic()`` to a list; each worker
process writes its CPU seconds at the first and the last body, then its stamps, one per line,
to the file named by ``BENCH_STAMPS`` and its pid when it exits, so every side's drain is
timed alike: from the first job's body to the last one's.

* ``stamp`` (``echomq worker _floor_jobs:stamp``): the raw ``Queue`` handler;
* ``app`` (``echomq worker _floor_jobs:app``): the task layer, one task ``stamp(n)`` on the
  queue named by ``BENCH_QUEUE``;
* ``batch_app`` (``echomq worker _floor_jobs:batch_app``): a batch task ``stamps`` on that
  queue, the body run once per member (batches of up to ``BATCH_SIZE``);
* ``python bench/_floor_jobs.py URL KEY JOBS``: the floor. No framework: ``RPOP KEY 10`` on one
  connection, the popped JSON triples decoded and their bodies run concurrently
  (``asyncio.gather``), ``BRPOP`` on a second connection when the list is empty; it exits
  once ``JOBS`` bodies ran. The same wire client (``echomq.wire.Connector``, no version
  fence) and the same event loop choice as ``echomq worker --loop auto``.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import sys
import time

from echomq import App, Batching, Job, Member
from echomq.consumers import loops
from echomq.wire.connector import Connector
from echomq.wire.url import ConnectionOptions

#: Most members per batch of the batch side (the bodies of a batch run one after another).
BATCH_SIZE = 100

_stamps: list[float] = []
_cpu: list[float] = []  # the process's CPU seconds at the first body and at the last


async def body(n: int) -> None:
    _stamps.append(time.monotonic())
    if len(_cpu) < 2:
        _cpu.append(time.process_time())
    else:
        _cpu[1] = time.process_time()


async def stamp(job: Job) -> None:
    await body(job.payload)


def make_app(url: str | None, queue: str) -> App:
    made = App(url, queue=queue)

    @made.task("stamp")
    async def task_stamp(n: int) -> None:
        await body(n)

    return made


def make_batch_app(url: str | None, queue: str) -> App:
    made = App(url, queue=queue)

    @made.task("stamps", batch=Batching(max_size=BATCH_SIZE, max_wait=0.05))
    async def task_stamps(members: list[Member[int]]) -> None:
        for member in members:
            await body(member.item)

    return made


app = make_app(None, os.environ.get("BENCH_QUEUE", "floor"))
batch_app = make_batch_app(None, os.environ.get("BENCH_QUEUE", "floor"))


@atexit.register
def _dump() -> None:
    path = os.environ.get("BENCH_STAMPS")
    if path and _stamps:  # one file per process: `--processes N` runs N of them
        with open(f"{path}.{os.getpid()}", "w") as out:
            out.write(" ".join(f"{s:.9f}" for s in _cpu) + "\n")
            out.write("\n".join(f"{s:.9f}" for s in _stamps))


async def floor(url: str, key: str, jobs: int) -> None:
    options = ConnectionOptions.from_url(url)
    conn = await Connector(options, version_fence=None).connect()
    blocker = await Connector(options, version_fence=None).connect()
    done = 0
    try:
        while done < jobs:
            popped = await conn.call("RPOP", key, "10")
            if popped is None:
                got = await blocker.call_blocking(1.0, "BRPOP", key, "1")
                if got is None:
                    continue
                popped = [got[1]]
            await asyncio.gather(*(body(json.loads(raw)[1][0]) for raw in popped))
            done += len(popped)
    finally:
        await conn.close()
        await blocker.close()


if __name__ == "__main__":
    _, factory = loops.choose(os.environ.get("BENCH_LOOP", "auto"))
    loops.run_on(factory, floor(sys.argv[1], sys.argv[2], int(sys.argv[3])))

"""A sharded queue against one slot on the local cluster: bulk enqueue and drain throughput, per
shard and in total, the engine's µs per job on each primary, and what that projects to.

Run: ``.venv/bin/python bench/shards.py [--runs 3] [--jobs 20000] [--shards 6] [--lanes 600]``.
Starts an embedded cluster of 3 primaries (``--replicas`` each, default 0: a replica's stream
is CPU the 2 cores would lose to something that is not the engine). Each run, and each side in
it (sides interleaved, the first side alternating run by run), on a fresh queue name:

* (a) a plain ``Queue``: one slot, so one primary;
* (b) a ``ShardedQueue`` of ``--shards`` shards, spread over the primaries by their tags.

``--jobs`` no-op jobs over ``--lanes`` tenants are admitted by ``--producers`` tasks sending
``enqueue_many`` chunks of ``--chunk`` (timed: bulk enqueue jobs/s), then drained by
``--loops`` ``claim_batch(--batch)`` + ``complete_each`` loops in ``--procs`` client processes
started together (timed to the last completion: drain jobs/s). The loops are the engine's own
verbs and nothing else (no ``Consumer``: its handler tasks and settler are client CPU the
figure would carry, and the client shares the 2 cores with the servers).

Around each phase, every primary's ``INFO commandstats`` (the server's µs inside scripts:
``evalsha``, ``evalsha_ro``, ``eval``, ``fcall``) and its process CPU (``/proc/<pid>/stat``)
are read; divided by the jobs that primary served they give the engine's µs per job there, and
the primary's whole CPU per job (the scripts plus the network I/O). The client's CPU is
``time.process_time`` in each process. Prints medians of ``--runs``, then the projection: a
primary with a core of its own serves ~1e6 / (its µs per job) jobs/s, so a queue whose jobs
are spread over primaries with shares f_p gives ≈ min_p capacity_p / f_p (per side from its
own figures, and to P primaries from one per-job cost pooled over every primary that served
jobs: the engine's commands per job are the same on a shard as on one slot). That is a
projection, not a measurement: the measured figure is whatever bounds this machine, and the
script says which (the client, one primary's thread, the 2 cores, or none of them: round
trips), from the machine's busy time (``/proc/stat``) and each part's CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from echomq import Item, Queue
from echomq.engine import ShardedQueue
from echomq.engine.keys import Keyspace, slot
from echomq.server import ClusterOptions, EmbeddedCluster
from echomq.testing import discard
from echomq.wire.cluster import ClusterRouter
from echomq.wire.url import seeds_from_url

#: The commands a script runs as (everything else in commandstats ran inside one, or is ours).
SCRIPTS = ("evalsha", "evalsha_ro", "eval", "eval_ro", "fcall", "fcall_ro")
#: What a client sends itself beside scripts; every other command ran inside a script, except
#: a sharded queue's reads of its shards' loads (``HGETALL``, ``HGET``, ``ZRANGE`` every
#: refresh: a few hundredths of a command per job, counted in with the engine's).
OUTSIDE = {
    "info",
    "config|resetstat",
    "script|load",
    "hello",
    "ping",
    "time",
    "client|setinfo",
    "cluster|slots",
    "cluster|shards",
    "cluster|nodes",
    "cluster|myid",
    "readonly",
    "command",
    "select",
}
TICK = os.sysconf("SC_CLK_TCK")


# -- what the primaries spent --------------------------------------------------------------------


def script_stats(info: bytes | str) -> tuple[int, float, int]:
    """Script calls, the server's µs inside them and the commands run inside them, from an
    ``INFO commandstats`` reply."""
    text = info.decode() if isinstance(info, bytes) else info
    calls, usec, inner = 0, 0.0, 0
    for line in text.splitlines():
        if not line.startswith("cmdstat_"):
            continue
        name, _, rest = line.removeprefix("cmdstat_").partition(":")
        fields = dict(kv.split("=") for kv in rest.split(","))
        if name in SCRIPTS:
            calls += int(fields["calls"])
            usec += float(fields["usec"])
        elif name not in OUTSIDE:
            inner += int(fields["calls"])
    return calls, usec, inner


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) process ``pid`` has used."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy() -> float:
    """Seconds of CPU every core of the machine has spent busy so far (``/proc/stat``): ours and
    every other process's, so a phase shows what else ran on the 2 cores meanwhile."""
    with open("/proc/stat") as stat:
        ticks = [int(t) for t in stat.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / TICK  # all but idle and iowait


@dataclass
class Spent:
    """One primary's script calls, µs inside scripts, commands inside scripts and CPU seconds
    over a phase."""

    calls: int = 0
    usec: float = 0.0
    inner: int = 0
    cpu: float = 0.0


async def snapshot(router: ClusterRouter, pids: dict[str, int]) -> dict[str, Spent]:
    infos = await asyncio.gather(*(router.nodes[a].call("INFO", "commandstats") for a in pids))
    return {
        address: Spent(*script_stats(info), cpu=process_cpu(pid))
        for (address, pid), info in zip(pids.items(), infos, strict=True)
    }


def spent_between(before: dict[str, Spent], after: dict[str, Spent]) -> dict[str, Spent]:
    return {
        a: Spent(
            after[a].calls - before[a].calls,
            after[a].usec - before[a].usec,
            after[a].inner - before[a].inner,
            after[a].cpu - before[a].cpu,
        )
        for a in before
    }


# -- one side of one run --------------------------------------------------------------------------


async def open_side(
    router: ClusterRouter, name: str, shards: int, refresh: float | None = None
) -> Queue:
    if shards == 1:
        return Queue(name, router, events=False)
    every = {} if refresh is None else {"refresh": refresh}
    return await ShardedQueue.open(name, router, shards=shards, events=False, **every)


def name_on(url: str, primary: str) -> str:
    """A fresh queue name whose own slot (a plain queue's, a sharded queue's shard 0) is on
    ``primary``: every run puts each shard on the same primary, so medians per primary hold."""

    async def pick() -> str:
        async with ClusterRouter(seeds_from_url(url)) as router:
            while True:
                name = f"bench-{uuid.uuid4().hex[:10]}"
                if router.owner(slot(Keyspace(name).root)).address == primary:
                    return name

    return asyncio.run(pick())


def homes(router: ClusterRouter, queue: Queue) -> list[str]:
    """The primary of each of the queue's shards (one for a plain queue)."""
    shards = queue.shards if isinstance(queue, ShardedQueue) else (queue,)
    return [router.owner(slot(shard.keys.root)).address for shard in shards]


async def _drain(
    url: str, name: str, shards: int, loops: int, batch: int, start_at: float, refresh: float | None
) -> tuple[Counter[int], float, float, float, float, int, int]:
    router = await ClusterRouter(seeds_from_url(url)).connect()
    queue = await open_side(router, name, shards, refresh)
    claimed: Counter[int] = Counter()
    calls = [0, 0]  # claim_batch calls, reads of every shard's load (a sharded queue's)
    if isinstance(queue, ShardedQueue):
        read_loads = queue.read_loads

        async def counted() -> list[Any]:
            calls[1] += 1
            return await read_loads()

        queue.read_loads = counted  # type: ignore[method-assign]

    async def loop() -> None:
        while True:
            calls[0] += 1
            if not isinstance(jobs := await queue.claim_batch(batch), list):
                break
            await queue.complete_each(jobs)
            claimed[jobs[0].shard] += len(jobs)  # a batch comes from one shard

    await asyncio.sleep(max(0.0, start_at - time.time()))  # every process starts together
    busy, cpu = machine_busy(), time.process_time()
    await asyncio.gather(*(loop() for _ in range(loops)))
    cpu = time.process_time() - cpu
    end, busy_end = time.time(), machine_busy()
    await queue.close()
    await router.close()
    return claimed, cpu, end, busy, busy_end, calls[0], calls[1]


def drain(
    url: str, name: str, shards: int, loops: int, batch: int, start_at: float, refresh: float | None
) -> tuple[Counter[int], float, float, float, float, int, int]:
    return asyncio.run(_drain(url, name, shards, loops, batch, start_at, refresh))


@dataclass
class Side:
    """What one side measured in one run."""

    enqueue_rate: float
    enqueue_cpu: float  # client µs CPU per job
    enqueue_busy: float  # the machine's busy cores during the enqueue
    drain_rate: float
    drain_cpu: float  # client µs CPU per job, all client processes
    drain_wall: float  # µs per job
    drain_busy: float  # the machine's busy cores during the drain (every process, ours or not)
    admitted: dict[int, int]  # shard -> jobs admitted
    claimed: dict[int, int]  # shard -> jobs claimed
    enqueue_spent: dict[str, Spent]  # primary -> its share of the enqueue phase
    drain_spent: dict[str, Spent] = field(default_factory=dict)
    homes: list[str] = field(default_factory=list)
    claims: int = 0  # claim_batch calls in the drain, every loop's (the last, empty, too)
    reads: int = 0  # a sharded queue's reads of every shard's load in the drain


async def fill(
    queue: Queue, items: list[Item], producers: int, chunk: int
) -> tuple[float, float, float]:
    """Admit ``items`` by ``producers`` tasks sending chunks; (seconds, client CPU seconds,
    the machine's busy CPU seconds)."""
    chunks = iter(range(0, len(items), chunk))

    async def producer() -> None:
        for start in chunks:  # shared: each task takes the next chunk
            verdicts = await queue.enqueue_many(items[start : start + chunk])
            assert all(v.kind == "enqueued" for v in verdicts), Counter(v.kind for v in verdicts)

    busy, cpu, wall = machine_busy(), time.process_time(), time.perf_counter()
    await asyncio.gather(*(producer() for _ in range(producers)))
    return time.perf_counter() - wall, time.process_time() - cpu, machine_busy() - busy


def run_side(
    url: str, pool: ProcessPoolExecutor, pids: dict[str, int], shards: int, args: argparse.Namespace
) -> Side:
    name = name_on(url, next(iter(pids)))
    lanes = [f"tenant-{i}" for i in range(args.lanes)]
    items = [Item(i, lane=lanes[i % args.lanes]) for i in range(args.jobs)]

    async def prepare() -> tuple[Side, dict[str, Spent]]:
        async with ClusterRouter(seeds_from_url(url)) as router:
            queue = await open_side(router, name, shards)
            where = homes(router, queue)
            if isinstance(queue, ShardedQueue):
                placement = queue.placement_map
                admitted = Counter(placement.shard_of(item.lane or "") for item in items)
            else:
                admitted = Counter({0: len(items)})
            before = await snapshot(router, pids)
            seconds, cpu, busy = await fill(queue, items, args.producers, args.chunk)
            after = await snapshot(router, pids)
            side = Side(
                enqueue_rate=args.jobs / seconds,
                enqueue_cpu=cpu / args.jobs * 1e6,
                enqueue_busy=busy / seconds,
                drain_rate=0.0,
                drain_cpu=0.0,
                drain_wall=0.0,
                drain_busy=0.0,
                admitted=dict(admitted),
                claimed={},
                enqueue_spent=spent_between(before, after),
                homes=where,
            )
            await queue.close()
            return side, await snapshot(router, pids)

    side, before = asyncio.run(prepare())
    start_at = time.time() + 0.5  # time for every process to connect first
    per_proc = [args.loops // args.procs + (i < args.loops % args.procs) for i in range(args.procs)]
    results = list(
        pool.map(
            drain,
            [url] * args.procs,
            [name] * args.procs,
            [shards] * args.procs,
            per_proc,
            [args.batch] * args.procs,
            [start_at] * args.procs,
            [args.refresh] * args.procs,
        )
    )
    claimed: Counter[int] = Counter()
    for part, *_ in results:
        claimed.update(part)
    elapsed = max(r[2] for r in results) - start_at
    busy = max(r[4] for r in results) - min(r[3] for r in results)
    total = sum(claimed.values())
    assert total == args.jobs, (total, args.jobs)

    async def tidy() -> dict[str, Spent]:
        async with ClusterRouter(seeds_from_url(url)) as router:
            after = await snapshot(router, pids)
            queue = await open_side(router, name, shards)
            await discard(queue)
            return after

    after = asyncio.run(tidy())
    side.drain_rate = total / elapsed
    side.drain_wall = elapsed / total * 1e6
    side.drain_busy = busy / elapsed
    side.drain_cpu = sum(r[1] for r in results) / total * 1e6
    side.claimed = dict(claimed)
    side.drain_spent = spent_between(before, after)
    side.claims = sum(r[5] for r in results)
    side.reads = sum(r[6] for r in results)
    return side


# -- the tables ----------------------------------------------------------------------------------


def med(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


@dataclass
class PrimaryFigures:
    """One primary's medians over the runs, for one side."""

    shards: int
    admitted: float
    claimed: float
    share: float
    enqueue_usec: float  # engine µs (inside scripts) per job admitted there
    enqueue_cpu: float  # the primary's process CPU µs per job admitted there
    enqueue_inner: float  # commands inside scripts per job admitted there
    drain_usec: float  # engine µs per job claimed + completed there
    drain_calls: float  # script calls per job there
    drain_inner: float  # commands inside scripts per job there (exact, whatever the host's load)
    drain_cpu: float  # the primary's process CPU µs per job (scripts, I/O, its event loop)


def per_primary(runs: list[Side], primaries: list[str]) -> dict[str, PrimaryFigures]:
    figures: dict[str, PrimaryFigures] = {}
    for address in primaries:
        rows: list[tuple[float, ...]] = []
        shards = 0
        for side in runs:
            on = [k for k, home in enumerate(side.homes) if home == address]
            shards = len(on)
            admitted = sum(side.admitted.get(k, 0) for k in on)
            claimed = sum(side.claimed.get(k, 0) for k in on)
            enq, dr = side.enqueue_spent[address], side.drain_spent[address]
            rows.append(
                (
                    admitted,
                    claimed,
                    claimed / sum(side.claimed.values()),
                    enq.usec / admitted if admitted else 0.0,
                    enq.cpu * 1e6 / admitted if admitted else 0.0,
                    enq.inner / admitted if admitted else 0.0,
                    dr.usec / claimed if claimed else 0.0,
                    dr.calls / claimed if claimed else 0.0,
                    dr.inner / claimed if claimed else 0.0,
                    dr.cpu * 1e6 / claimed if claimed else 0.0,
                )
            )
        figures[address] = PrimaryFigures(shards, *(med(col) for col in zip(*rows, strict=True)))
    return figures


def bound_of(client: float, servers: float, busiest: float, machine: float, procs: int) -> str:
    """What bounded a measured phase, from the cores each part kept busy (``busiest``: the
    busiest primary's one thread; ``machine``: every process on the host, ours or not)."""
    if client >= 0.85 * procs:
        return "client-bound (its process ran on a core all along)"
    if busiest >= 0.85:
        return f"bound by one primary (its thread busy {busiest:.2f} of a core)"
    if machine >= 1.8:
        others = max(0.0, machine - client - servers)
        return (
            f"bound by the 2 cores (busy {machine:.2f}: client {client:.2f}, "
            f"primaries {servers:.2f}, other processes {others:.2f})"
        )
    return (
        f"neither a core, a primary nor the client saturated (busy {machine:.2f}): "
        "round trips and hand-offs between processes"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--shards", type=int, default=6, help="shards of side (b)")
    parser.add_argument("--lanes", type=int, default=600, help="tenants the jobs are spread over")
    parser.add_argument("--producers", type=int, default=4, help="enqueue_many tasks")
    parser.add_argument("--chunk", type=int, default=1000, help="items per enqueue_many")
    parser.add_argument("--loops", type=int, default=12, help="claim_batch loops in all")
    parser.add_argument("--batch", type=int, default=50, help="jobs per claim_batch")
    parser.add_argument("--procs", type=int, default=1, help="client processes draining")
    parser.add_argument("--replicas", type=int, default=0, help="replicas per primary")
    parser.add_argument(
        "--refresh", type=float, default=None, help="side (b)'s refresh, s (default: the queue's)"
    )
    args = parser.parse_args()
    if args.shards < 2:
        parser.error("--shards must be at least 2 (side (a) is the queue of one slot)")
    if args.loops < args.procs:
        parser.error("--loops must be at least --procs")
    with EmbeddedCluster(ClusterOptions(replicas=args.replicas)) as cluster:
        url = cluster.url
        pids: dict[str, int] = {}
        for node in cluster.primaries:
            assert node.pid is not None, node
            pids[f"{node.host}:{node.port}"] = node.pid
        primaries = list(pids)
        print(
            f"cluster {url}: {len(primaries)} primaries, {args.replicas} replica(s) each; "
            f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}"
        )
        print(
            f"{args.jobs:,} jobs over {args.lanes} lanes; enqueue_many({args.chunk}) x "
            f"{args.producers} tasks; drain: {args.loops} claim_batch({args.batch}) + "
            f"complete_each loops in {args.procs} process(es)"
        )
        sides = {"a": 1, "b": args.shards}
        label = {"a": "(a) Queue, 1 slot", "b": f"(b) ShardedQueue, {args.shards} shards"}
        runs: dict[str, list[Side]] = {"a": [], "b": []}
        with ProcessPoolExecutor(args.procs) as pool:
            for run in range(args.runs):
                order = ("a", "b") if run % 2 == 0 else ("b", "a")
                for key in order:  # interleaved: noise hits both sides alike
                    side = run_side(url, pool, pids, sides[key], args)
                    runs[key].append(side)
                    print(
                        f"  run {run + 1} {label[key]}: enqueue {side.enqueue_rate:,.0f} jobs/s, "
                        f"drain {side.drain_rate:,.0f} jobs/s",
                        flush=True,
                    )
        report(runs, label, primaries, args)


def report(
    runs: dict[str, list[Side]],
    label: dict[str, str],
    primaries: list[str],
    args: argparse.Namespace,
) -> None:
    n, jobs = args.runs, args.jobs
    print(f"\n### Throughput, measured (medians of {n})\n")
    print(
        "| side | phase | jobs/s | wall µs/job | client µs CPU/job | primaries' CPU µs/job "
        "| engine µs/job (scripts) | cores busy: client / primaries (busiest) / machine |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|")
    bounds: dict[tuple[str, str], str] = {}
    for key, sides in runs.items():
        for phase in ("enqueue", "drain"):
            if phase == "enqueue":
                rate = med([s.enqueue_rate for s in sides])
                wall = med([1e6 / s.enqueue_rate for s in sides])
                client = med([s.enqueue_cpu for s in sides])
                spent = [s.enqueue_spent for s in sides]
                machine = med([s.enqueue_busy for s in sides])
            else:
                rate = med([s.drain_rate for s in sides])
                wall = med([s.drain_wall for s in sides])
                client = med([s.drain_cpu for s in sides])
                spent = [s.drain_spent for s in sides]
                machine = med([s.drain_busy for s in sides])
            servers = med([sum(p.cpu for p in x.values()) * 1e6 / jobs for x in spent])
            busiest = med([max(p.cpu for p in x.values()) * 1e6 / jobs for x in spent])
            engine = med([sum(p.usec for p in x.values()) / jobs for x in spent])
            procs = args.procs if phase == "drain" else 1
            bounds[key, phase] = bound_of(
                client / wall, servers / wall, busiest / wall, machine, procs
            )
            print(
                f"| {label[key]} | {phase} | {rate:,.0f} | {wall:.1f} | {client:.1f} "
                f"| {servers:.1f} | {engine:.1f} "
                f"| {client / wall:.2f} / {servers / wall:.2f} ({busiest / wall:.2f}) "
                f"/ {machine:.2f} |"
            )
    print()
    for (key, phase), bound in bounds.items():
        print(f"* {label[key]}, {phase}: measured, {bound}")

    b = runs["b"]
    every = "the default" if args.refresh is None else f"{args.refresh} s"
    print(
        f"* {label['b']}, drain: refresh {every}; "
        f"{med([s.reads / s.claims * 10_000 for s in b]):.0f} reads of every shard's load per "
        f"10k claim_batch calls ({med([s.claims for s in b]):.0f} calls, "
        f"{med([s.reads for s in b]):.0f} reads)"
    )
    print(f"\n### {label['b']}: per shard (medians of {n})\n")
    print("| shard | primary | jobs admitted | jobs claimed | share of claims |")
    print("|---:|---|---:|---:|---:|")
    for k, home in enumerate(b[0].homes):
        claimed = med([s.claimed.get(k, 0) for s in b])
        print(
            f"| {k} | {home} | {med([s.admitted.get(k, 0) for s in b]):,.0f} "
            f"| {claimed:,.0f} | {claimed / jobs:.1%} |"
        )

    figures = {key: per_primary(sides, primaries) for key, sides in runs.items()}
    projected: dict[str, tuple[float, float]] = {}
    for key, by_primary in figures.items():
        print(f"\n### {label[key]}: per primary (medians of {n})\n")
        print(
            "| primary | shards | jobs claimed | share | enqueue: engine µs/job "
            "| enqueue: CPU µs/job | enqueue: commands in scripts/job | drain: engine µs/job "
            "| drain: scripts/job "
            "| drain: commands in scripts/job | drain: CPU µs/job | one core's jobs/s (CPU) "
            "| ÷ share |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        by_engine: list[float] = []
        by_cpu: list[float] = []
        for address, f in by_primary.items():
            if not f.claimed:
                print(f"| {address} | 0 | 0 | — | — | — | — | — | — | — | — | — | — |")
                continue
            capacity = 1e6 / f.drain_cpu
            by_engine.append(1e6 / f.drain_usec / f.share)
            by_cpu.append(capacity / f.share)
            print(
                f"| {address} | {f.shards} | {f.claimed:,.0f} | {f.share:.1%} "
                f"| {f.enqueue_usec:.1f} | {f.enqueue_cpu:.1f} | {f.enqueue_inner:.2f} "
                f"| {f.drain_usec:.1f} "
                f"| {f.drain_calls:.3f} | {f.drain_inner:.2f} | {f.drain_cpu:.1f} "
                f"| {capacity:,.0f} | {capacity / f.share:,.0f} |"
            )
        projected[key] = (min(by_engine), min(by_cpu))

    print("\n### Drain: measured here, projected with a core per primary\n")
    print(
        "| side | measured jobs/s (this 2-core host) | projection: primary CPU "
        "| projection: engine µs only |"
    )
    print("|---|---:|---:|---:|")
    for key, sides in runs.items():
        engine, cpu = projected[key]
        print(
            f"| {label[key]} | {med([s.drain_rate for s in sides]):,.0f} | {cpu:,.0f} "
            f"| {engine:,.0f} |"
        )
    print(
        "\nprojection (not measured) = min over primaries of (1e6 / its µs per job) / (its share "
        "of the jobs), each primary on a core of its own and the clients free. 'primary CPU': "
        "the server process's CPU per job (/proc: scripts, network I/O, event loop). 'engine "
        "µs only': INFO commandstats' µs inside scripts, which is wall time in the call, so on "
        "an oversubscribed host it also counts the time the server was descheduled mid-script."
    )

    # The engine's work per job is the same on a shard as on one slot (commands in scripts per
    # job, above), so one per-job cost serves every case: the median over every primary that
    # served jobs, both sides (this host's noise moves each side's by ±15% run to run).
    served = [f for side in figures.values() for f in side.values() if f.claimed]
    cost = med([f.drain_cpu for f in served])
    capacity = 1e6 / cost
    busiest = max(f.share for f in figures["b"].values())
    client = med([s.drain_cpu for s in b])
    print(
        f"\n### Projection to P primaries (not measured: a core per primary, clients free; "
        f"{cost:.1f} µs of primary CPU per job drained, the median over every primary that "
        f"served jobs, both sides)\n"
    )
    print("| primaries | spread | projected drain jobs/s | client cores it needs |")
    print("|---:|---|---:|---:|")
    print(f"| 1 | one slot | {capacity:,.0f} | {capacity * client / 1e6:.1f} |")
    rows = [(len(primaries), f"these shards (busiest primary {busiest:.1%})", busiest)]
    rows += [(p, "active weight even", 1 / p) for p in (len(primaries), 6, 12, 24)]
    for p, spread, share in rows:
        total = capacity / share
        print(f"| {p} | {spread} | {total:,.0f} | {total * client / 1e6:.1f} |")
    print(
        f"\nclient cores at the measured {client:.1f} µs of client CPU per job drained "
        f"({label['b']})."
    )


if __name__ == "__main__":
    main()

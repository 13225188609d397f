"""Acknowledged means on disk, when asked: a queue's Durability sends one WAITAOF per batch on the
connection that carried it, refuses a server without AOF, and says when the fsyncs fell short.

The waits are counted on the server (``INFO commandstats``), on a server of this module's own
that runs with ``appendonly yes`` (the session's server runs without AOF: the refusal's case).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from echomq import App, InvalidArgument, Item, Job, Queue, SyncQueue
from echomq.engine import Durability, Flow, ShardedQueue, ShardedSyncQueue
from echomq.engine.lane_move import LaneMove
from echomq.errors import DurabilityUnavailable, NotDurable
from echomq.server import EmbeddedValkey
from echomq.server.embedded import ServerOptions
from echomq.testing import discard, lanes_on
from echomq.wire import Connector
from echomq.wire.url import ConnectionOptions

FSYNC = Durability(timeout=2.0)


@pytest.fixture(scope="module")
def aof_url() -> Iterator[str]:
    """A server with AOF on, fsyncing every write (so a wait is answered at once)."""
    options = ServerOptions(appendonly=True, extra=(("appendfsync", "always"),))
    with EmbeddedValkey(options) as server:
        yield server.url


@pytest.fixture(scope="module")
def replicated_url() -> Iterator[str]:
    """A primary and one replica, both fsyncing every write to their AOF."""
    fsync = (("appendfsync", "always"),)
    at_once = (("repl-diskless-sync-delay", "0"),)  # not the default 5 s for more replicas
    with EmbeddedValkey(ServerOptions(appendonly=True, extra=fsync + at_once)) as primary:
        replica_of = (("replicaof", f"{primary.host} {primary.port}"),)
        with EmbeddedValkey(ServerOptions(appendonly=True, extra=fsync + replica_of)):
            yield primary.url


async def replica_fsyncs(url: str, key: str) -> None:
    """Wait until the replica confirms the fsync of a write (its AOF on, its first rewrite
    over: till then it acks no fsync). A wait after no write of its connection is answered
    at once, so a write first, on the probe's own socket."""
    async with Connector(ConnectionOptions.from_url(url), version_fence=None) as probe:
        deadline = time.monotonic() + 30
        while True:
            await probe.call("SET", key, 1, "PX", 1000)
            if (await probe.call("WAITAOF", 0, 1, 100))[1] >= 1:
                return
            assert time.monotonic() < deadline, "the replica never confirmed an fsync"


async def waitaof_calls(url: str) -> int:
    """How many WAITAOF the server has run since it started."""
    async with Connector(ConnectionOptions.from_url(url), version_fence=None) as probe:
        info = (await probe.call("INFO", "commandstats")).decode()
    found = re.search(r"cmdstat_waitaof:calls=(\d+)", info)
    return int(found.group(1)) if found else 0


async def warm(queue: Queue) -> None:
    """Scripts loaded first: a NOSCRIPT resend carries a wait of its own (its own pipeline)."""
    for script in queue.scripts.scripts.values():
        await queue.scripts.load(queue.wire, script)


@pytest.fixture
async def durable(aof_url: str, queue_name: str) -> AsyncIterator[Queue]:
    queue = await Queue.connect(aof_url, queue_name, durability=FSYNC)
    await warm(queue)
    yield queue
    await discard(queue)


async def test_enqueue_many_waits_once_per_batch_not_per_item(durable: Queue, aof_url: str) -> None:
    before = await waitaof_calls(aof_url)
    verdicts = await durable.enqueue_many(
        [Item({"n": i}, delay=60 if i % 7 == 0 else None) for i in range(350)]
    )
    assert {v.kind for v in verdicts} == {"enqueued", "scheduled"}
    # 350 items are four script calls; one WAITAOF after them, in the same pipeline.
    assert await waitaof_calls(aof_url) - before == 1
    assert (await durable.counts()).pending + (await durable.counts()).scheduled == 350


async def test_every_single_admission_waits(durable: Queue, aof_url: str) -> None:
    before = await waitaof_calls(aof_url)
    await durable.enqueue({"n": 1})
    await durable.enqueue_in(30, {"n": 2})
    await durable.enqueue_at(2_000_000_000, {"n": 3})
    assert await waitaof_calls(aof_url) - before == 3


async def test_concurrent_admissions_share_the_wait_of_their_flush(
    durable: Queue, aof_url: str
) -> None:
    await durable.minter.ready()
    before = await waitaof_calls(aof_url)
    verdicts = await asyncio.gather(*(durable.enqueue(i) for i in range(50)))
    assert {v.kind for v in verdicts} == {"enqueued"}
    # The first call goes out at once on the idle socket, the other 49 in the next write:
    # each write ends with one WAITAOF (a wait blocks its connection: one per caller would
    # queue 50 fsyncs behind each other).
    assert await waitaof_calls(aof_url) - before <= 2


async def test_a_flow_waits_once_per_queue_it_writes(durable: Queue, aof_url: str) -> None:
    await durable.minter.ready()
    before = await waitaof_calls(aof_url)
    ids = await durable.add_flow(Flow("parent", children=[Flow("a"), Flow("b")]))
    assert ids.kind == "enqueued"
    assert await waitaof_calls(aof_url) - before == 1


async def test_a_duplicate_is_covered_by_a_mark_before_its_wait(
    durable: Queue, aof_url: str
) -> None:
    # A wait covers its own connection's writes only, and a duplicate wrote nothing: the job
    # it points at came from elsewhere (here a queue without durability, on its own socket).
    plain = await Queue.connect(aof_url, durable.name)
    try:
        first = await plain.enqueue({"n": 1})
        before = await waitaof_calls(aof_url)
        again = await durable.enqueue({"n": 1}, id=first.id)
        assert again.kind == "duplicate"
        assert await waitaof_calls(aof_url) - before == 2  # the batch's, then the mark's
        assert await durable.wire.call("EXISTS", durable.keys.fsync) == 1
        verdicts = await durable.enqueue_many([Item(2), Item(3, id=first.id)])
        assert [v.kind for v in verdicts] == ["enqueued", "duplicate"]
        assert await waitaof_calls(aof_url) - before == 4
        await durable.enqueue({"n": 4})  # nothing to cover: one wait
        assert await waitaof_calls(aof_url) - before == 5
    finally:
        await plain.close()


async def test_the_default_queue_never_waits(aof_url: str, queue_name: str) -> None:
    queue = await Queue.connect(aof_url, queue_name)
    try:
        before = await waitaof_calls(aof_url)
        await queue.enqueue({"n": 1})
        await queue.enqueue_many(range(150))
        assert await waitaof_calls(aof_url) - before == 0
    finally:
        await discard(queue)


async def test_settles_wait_only_when_asked(aof_url: str, queue_name: str) -> None:
    admissions_only = await Queue.connect(aof_url, queue_name, durability=FSYNC)
    settles = await Queue.connect(
        aof_url, queue_name + "-s", durability=Durability(timeout=2.0, settles=True)
    )
    try:
        await warm(settles)
        for queue, waits in ((admissions_only, 0), (settles, 1)):
            await queue.enqueue_many(range(5))
            jobs = await queue.claim_batch(5)
            assert isinstance(jobs, list)
            before = await waitaof_calls(aof_url)
            assert await queue.complete_each(jobs) == ["completed"] * 5
            assert await waitaof_calls(aof_url) - before == waits
        await settles.enqueue(1)
        job = await settles.claim()
        before = await waitaof_calls(aof_url)
        assert isinstance(job, Job)
        assert await settles.retry(job, error="boom", max_attempts=1) == "dead"
        assert await waitaof_calls(aof_url) - before == 1
    finally:
        await discard(admissions_only)
        await discard(settles)


async def test_sync_queue_waits_once_per_batch(aof_url: str, queue_name: str) -> None:
    queue = await asyncio.to_thread(SyncQueue.connect, aof_url, queue_name, durability=FSYNC)
    try:
        before = await waitaof_calls(aof_url)
        verdicts = await asyncio.to_thread(queue.enqueue_many, range(250))
        assert {v.kind for v in verdicts} == {"enqueued"}
        assert await waitaof_calls(aof_url) - before == 1
        await asyncio.to_thread(queue.enqueue, {"n": 1})
        assert await waitaof_calls(aof_url) - before == 2
    finally:
        queue.close()
        await discard(await Queue.connect(aof_url, queue_name))


async def test_a_sharded_batch_waits_once_per_server_not_per_shard(
    aof_url: str, queue_name: str
) -> None:
    """Three shards on one server share its socket: one WAITAOF after every shard's writes
    covers them all (a wait covers every earlier write on its connection), for the async
    queue and the blocking producer alike; a duplicate on two shards costs one mark's wait."""
    sharded = await ShardedQueue.connect(aof_url, queue_name, shards=3, durability=FSYNC)
    sync = await asyncio.to_thread(
        ShardedSyncQueue.connect, aof_url, queue_name, shards=3, durability=FSYNC
    )
    try:
        await warm(sharded)  # the shards share the wire and the scripts
        await sharded.minter.ready()
        lanes = [lane for part in lanes_on(sharded.placement_map, [2, 2, 2]) for lane in part]
        before = await waitaof_calls(aof_url)
        verdicts = await sharded.enqueue_many([Item(i, lane=lanes[i % 6]) for i in range(30)])
        assert {v.kind for v in verdicts} == {"enqueued"}
        assert await waitaof_calls(aof_url) - before == 1
        # Items 1 and 2 live on shards 1 and 2 (lanes[2], lanes[4]): sent again, duplicates.
        again = [
            Item(9, lane=lanes[2], id=verdicts[2].id),
            Item(9, lane=lanes[4], id=verdicts[4].id),
        ]
        before = await waitaof_calls(aof_url)
        kinds = [v.kind for v in await sharded.enqueue_many([Item("new", lane=lanes[0]), *again])]
        assert kinds == ["enqueued", "duplicate", "duplicate"]
        assert await waitaof_calls(aof_url) - before == 2  # the batch's, then the marks'
        before = await waitaof_calls(aof_url)
        blocking = [Item(i, lane=lanes[i % 6]) for i in range(30)]
        verdicts = await asyncio.to_thread(sync.enqueue_many, blocking)
        assert {v.kind for v in verdicts} == {"enqueued"}
        assert await waitaof_calls(aof_url) - before == 1
        await sharded.wire.call("DEL", *(shard.keys.fsync for shard in sharded.shards))
        before = await waitaof_calls(aof_url)
        verdicts = await asyncio.to_thread(sync.enqueue_many, [Item("new", lane=lanes[0]), *again])
        assert [v.kind for v in verdicts] == ["enqueued", "duplicate", "duplicate"]
        assert await waitaof_calls(aof_url) - before == 1  # one mark, then the server's wait
        marks = [await sharded.wire.call("EXISTS", s.keys.fsync) for s in sharded.shards]
        assert sum(marks) == 1
    finally:
        sync.close()
        await discard(sharded)


async def _wire(url: str) -> Connector:
    return await Connector(ConnectionOptions.from_url(url)).connect()


async def test_app_tasks_admit_durably(aof_url: str, queue_name: str) -> None:
    app = App(aof_url, queue=queue_name, durability=FSYNC)

    @app.task
    async def add(a: int, b: int) -> int:
        return a + b

    async with app:
        before = await waitaof_calls(aof_url)
        await add.enqueue(1, 2)
        await app.enqueue_many([add.call(i, i) for i in range(120)])
        assert await waitaof_calls(aof_url) - before == 2
        await discard(app.queue())


async def test_a_replica_fsync_confirms_one_item_a_batch_and_a_sharded_batch(
    replicated_url: str, queue_name: str
) -> None:
    """With a replica that fsyncs, ``replicas=1`` confirms every call (``NotDurable`` if a wait
    fell short): one item, a batch, and a batch over a sharded queue's shards. The wait goes
    after the writes' replies (``test_connector.py``: else the replica answers the offset it
    had before them, and the call waits for its next once-a-second ack; the figures are
    ``bench/durable_enqueue.py``'s)."""
    durable = Durability(replicas=1, timeout=3.0)
    queue = await Queue.connect(replicated_url, queue_name, durability=durable)
    sharded = await ShardedQueue.connect(
        replicated_url, queue_name + "-sharded", shards=3, durability=durable
    )
    try:
        await replica_fsyncs(replicated_url, queue.keys.fsync)
        lanes = [lane for part in lanes_on(sharded.placement_map, [1, 1, 1]) for lane in part]
        spread = [Item(i, lane=lanes[i % 3]) for i in range(60)]
        verdicts = [await queue.enqueue(0)]
        verdicts += await queue.enqueue_many(range(60))
        verdicts += await sharded.enqueue_many(spread)
        assert [v.kind for v in verdicts] == ["enqueued"] * 121
    finally:
        await discard(queue)
        await discard(sharded)


# -- refusals ----------------------------------------------------------------------------------


async def test_connect_refuses_a_server_without_aof(valkey_url: str, queue_name: str) -> None:
    with pytest.raises(DurabilityUnavailable, match="appendonly yes"):
        await Queue.connect(valkey_url, queue_name, durability=Durability())
    with pytest.raises(DurabilityUnavailable):
        await asyncio.to_thread(SyncQueue.connect, valkey_url, queue_name, durability=Durability())


async def test_a_shared_wire_refuses_at_first_use_before_writing(
    valkey_url: str, queue_name: str
) -> None:
    wire = await _wire(valkey_url)
    try:
        queue = Queue(queue_name, wire, durability=Durability())
        with pytest.raises(DurabilityUnavailable):
            await queue.enqueue({"n": 1})
        with pytest.raises(DurabilityUnavailable):
            await queue.enqueue_many(range(3))
        assert (await queue.counts()).pending == 0  # nothing was written
        await discard(queue)
    finally:
        await wire.close()


async def test_a_shortfall_raises_not_durable_after_the_write(
    valkey_url: str, queue_name: str
) -> None:
    # No replica exists: WAITAOF 0 1 times out with 0 of 1 replica fsyncs.
    queue = await Queue.connect(
        valkey_url, queue_name, durability=Durability(local=False, replicas=1, timeout=0.05)
    )
    try:
        job_id = queue.minter.mint("JOB") if queue.minter.is_ready else None
        if job_id is None:
            await queue.minter.ready()
            job_id = queue.minter.mint("JOB")
        with pytest.raises(NotDurable) as raised:
            await queue.enqueue({"n": 1}, id=job_id)
        assert raised.value.ids == (job_id,)
        assert raised.value.asked == (0, 1)
        assert raised.value.got == (0, 0)
        assert await queue.state(job_id) == "pending"  # the write happened
        # Sent again with the same id: idempotent, still not confirmed.
        with pytest.raises(NotDurable):
            await queue.enqueue({"n": 1}, id=job_id)
        verdicts = await queue.enqueue_many([Item(1), Item(2, id="not-a-job-id")])
        assert verdicts[0].kind == "unknown"
        assert isinstance(verdicts[0].error, NotDurable)
        assert verdicts[1].kind == "error"  # refused before writing: not a durability matter
        assert (await queue.counts()).pending == 2
    finally:
        await discard(queue)


async def test_a_caller_sends_a_short_admission_again_with_its_id(
    valkey_url: str, queue_name: str
) -> None:
    # No replica exists here: every wait for one falls short, and each resend is idempotent.
    queue = await Queue.connect(
        valkey_url, queue_name, durability=Durability(local=False, replicas=1, timeout=0.05)
    )
    await queue.minter.ready()
    shorts: list[NotDurable] = []
    try:
        # --8<-- [start:resend]
        job_id = queue.minter.mint("JOB")  # an id kept by the caller: a resend carries it
        verdict = None
        for _attempt in range(3):
            try:
                verdict = await queue.enqueue({"order": 42}, id=job_id)
                break  # on disk as asked ("enqueued", or "duplicate" of the earlier send)
            except NotDurable as short:
                shorts.append(short)  # written, maybe not on disk yet: send it again
        # --8<-- [end:resend]
        assert verdict is None  # never confirmed here
        assert [s.got for s in shorts] == [(0, 0)] * 3
        assert (await queue.counts()).pending == 1  # three sends, one job
    finally:
        await discard(queue)


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"local": "yes"}, "durability.local"),
        ({"replicas": -1}, "durability.replicas"),
        ({"replicas": 17}, "durability.replicas"),
        ({"replicas": 1.5}, "durability.replicas"),
        ({"local": False, "replicas": 0}, "durability.replicas"),
        ({"timeout": 0}, "durability.timeout"),
        ({"timeout": -1.0}, "durability.timeout"),
        ({"timeout": float("nan")}, "durability.timeout"),
        ({"timeout": 61}, "durability.timeout"),
        ({"settles": 1}, "durability.settles"),
    ],
)
def test_bad_durability_values_are_refused(options: dict[str, object], argument: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        Durability(**options)  # type: ignore[arg-type]
    assert refused.value.argument == argument


async def test_a_queue_refuses_what_is_not_a_durability_before_connecting(
    queue_name: str,
) -> None:
    unreachable = "valkey://127.0.0.1:1"  # never reached: refused first
    with pytest.raises(InvalidArgument) as refused:
        await Queue.connect(unreachable, queue_name, durability="fsync")
    assert refused.value.argument == "durability"
    with pytest.raises(InvalidArgument) as refused:
        await Queue.connect(unreachable, queue_name, durability=Durability(timeout=5.0))
    assert refused.value.argument == "durability.timeout"  # not below call_timeout (5 s)
    with pytest.raises(InvalidArgument) as refused:
        App(unreachable, durability=True)  # type: ignore[arg-type]
    assert refused.value.argument == "durability"
    with pytest.raises(InvalidArgument) as refused:
        SyncQueue(queue_name, [ConnectionOptions.from_url(unreachable)], durability="always")  # type: ignore[arg-type]
    assert refused.value.argument == "durability"


async def test_a_duplicate_found_on_a_held_lanes_source_is_covered_there(
    aof_url: str, queue_name: str
) -> None:
    """While a lane is held for a move, a keyed item's duplicate is read on the lane's source
    (docs/concepts/shards.md, "Dedup while a lane is held"), not answered by a write: the job
    it points at came from another connection, so the source's mark must be waited for, as
    a duplicate answered by the enqueue script is."""
    plain = await ShardedQueue.connect(aof_url, queue_name, shards=3)
    sharded = await ShardedQueue.connect(aof_url, queue_name, shards=3, durability=FSYNC)
    sync = await asyncio.to_thread(
        ShardedSyncQueue.connect, aof_url, queue_name, shards=3, durability=FSYNC
    )
    try:
        lane = lanes_on(plain.placement_map, [1])[0][0]  # on shard 0, held on shard 2
        first = await plain.enqueue("a", lane=lane, dedup_key="k")
        assert await LaneMove(sharded, lane, 2).run(("adopt", "freeze")) is True
        source = sharded.shards[0]
        sends = [
            lambda: sharded.enqueue("dup", lane=lane, dedup_key="k"),
            lambda: sharded.enqueue_many([Item("dup", lane=lane, dedup_key="k")]),
            lambda: asyncio.to_thread(sync.enqueue, "dup", lane=lane, dedup_key="k"),
            lambda: asyncio.to_thread(sync.enqueue_many, [Item("dup", lane=lane, dedup_key="k")]),
        ]
        for send in sends:
            await sharded.wire.call("DEL", *(shard.keys.fsync for shard in sharded.shards))
            verdict = await send()
            verdict = verdict[0] if isinstance(verdict, list) else verdict
            assert (verdict.kind, verdict.id) == ("duplicate", first.id)
            assert await source.wire.call("EXISTS", source.keys.fsync) == 1
        assert await LaneMove(sharded, lane, 2).run() is True
    finally:
        sync.close()
        await plain.close()
        await discard(sharded)

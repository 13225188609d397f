"""Ids unique across processes with no configuration: every queue's default minter leases a node
of its own from the engine (``{emq}:nodes``), and a node changes hands only with its ceiling.

These tests own a server of their own: they fill and inspect the deployment-wide node hash.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator

import pytest

from echomq import ConnectionOptions, Item, Queue
from echomq.engine import Minter
from echomq.engine.ids import TS_SHIFT, parse
from echomq.engine.nodes import NODES_KEY
from echomq.errors import NodeLeaseError
from echomq.server import EmbeddedValkey
from echomq.wire import Connector

FULL = os.environ.get("ECHOMQ_TEST_FULL_SCALE") == "1"
PRODUCERS = 8
IDS_EACH = 20_000 if FULL else 4_000
BATCH = 100

PRODUCER = """
import asyncio, json, sys
from echomq import ConnectionOptions, Item, Queue
from echomq.wire import Connector

async def main(url, name, count, batch):
    queue = await Queue.connect(url, name, events=False)
    await queue.minter.ready()
    await queue.wire.call("RPUSH", "ready:" + name, 1)
    # Every producer starts in the same ms. A connector of its own: a BLPOP on the pool's would
    # be taken for a stuck socket after the call timeout, and eight starting processes on two
    # cores can take longer than that.
    async with Connector(ConnectionOptions.from_url(url)) as gate:
        await gate.call_blocking(30, "BLPOP", "go:" + name, 30)
    kinds = {}
    for start in range(0, count, batch):
        verdicts = await queue.enqueue_many([Item(n) for n in range(start, start + batch)])
        for v in verdicts:
            kinds[v.kind] = kinds.get(v.kind, 0) + 1
    print(json.dumps({"node": queue.minter.node, "kinds": kinds}))
    await queue.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedValkey]:
    with EmbeddedValkey() as embedded:
        yield embedded


@pytest.fixture
async def admin(server: EmbeddedValkey) -> AsyncIterator[Connector]:
    async with Connector(ConnectionOptions.from_url(server.url)) as connector:
        await connector.call("DEL", NODES_KEY)
        yield connector


async def test_producers_in_eight_processes_lose_no_job(
    server: EmbeddedValkey, admin: Connector, queue_name: str
) -> None:
    """Before the lease every process minted as node 0, and the same ms minted the same id:
    the second enqueue answered duplicate and its payload was never stored."""
    argv = [sys.executable, "-c", PRODUCER, server.url, queue_name, str(IDS_EACH), str(BATCH)]
    procs = [
        await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
        for _ in range(PRODUCERS)
    ]
    try:
        for _ in range(PRODUCERS):
            ready = await admin.call_blocking(60, "BLPOP", "ready:" + queue_name, 60)
            assert ready is not None
        await admin.call("RPUSH", "go:" + queue_name, *[1] * PRODUCERS)
        outputs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), 120)
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    reports = [json.loads(out) for out, _ in outputs]
    assert len({r["node"] for r in reports}) == PRODUCERS, "two producers shared a node"
    total = PRODUCERS * IDS_EACH
    assert sum(r["kinds"].get("enqueued", 0) for r in reports) == total, reports
    queue = await Queue.connect(server.url, queue_name)
    try:
        assert (await queue.counts()).pending == total
    finally:
        await queue.pause()
        await queue.obliterate(force=True)
        await queue.close()


async def test_live_minters_hold_distinct_nodes_and_release_them(
    server: EmbeddedValkey, admin: Connector
) -> None:
    minters = [Minter.leased(admin) for _ in range(5)]
    await asyncio.gather(*(m.ready() for m in minters))
    assert len({m.node for m in minters}) == 5
    for m in minters:
        m.mint("JOB")
    await minters[0].release()
    assert not minters[0].is_ready
    with pytest.raises(NodeLeaseError, match=r"await minter.ready\(\)"):
        minters[0].mint("JOB")
    for m in minters[1:]:
        await m.release()


async def test_a_node_taken_over_mints_above_every_id_its_last_holder_minted(
    admin: Connector,
) -> None:
    first = Minter.leased(admin)
    await first.ready()
    # The first holder's clock runs an hour ahead of the next one's.
    ahead = Minter.leased(admin, clock=lambda: 1_800_000_000_000 + 3_600_000)
    await ahead.ready()
    last = ahead.mint("JOB")
    node = ahead.node
    await ahead.release()
    # Leave only ahead's old node free: every other node is held by a live stranger.
    live = {n: f"{'ab' * 16}:9999999999999:0" for n in range(1024) if n not in (node, first.node)}
    await admin.call("HSET", NODES_KEY, *[x for pair in live.items() for x in pair])
    behind = Minter.leased(admin, clock=lambda: 1_800_000_000_000)
    await behind.ready()
    assert behind.node == node
    assert behind.mint("JOB") > last, "a new holder minted below its predecessor's ids"
    assert parse(behind.mint("JOB"))[1] >> TS_SHIFT > parse(last)[1] >> TS_SHIFT
    # And with that node taken too, the next minter is told why it has none.
    with pytest.raises(NodeLeaseError, match="all 1024 id nodes"):
        await Minter.leased(admin).ready()
    await behind.release()
    await first.release()


async def test_a_lost_lease_stops_minting_until_another_node_is_leased(admin: Connector) -> None:
    minter = Minter.leased(admin)
    await minter.ready()
    before = minter.mint("JOB")
    assert minter.lease is not None
    await admin.call("HSET", NODES_KEY, minter.node, f"{'cd' * 16}:9999999999999:0")
    assert await minter.lease.renew() is False
    with pytest.raises(NodeLeaseError):
        minter.mint("JOB")
    old = minter.node
    await minter.ready()
    assert minter.node != old
    assert minter.mint("JOB") > before, "byte order is mint order across a change of node"
    await minter.release()


async def test_queue_leases_lazily_and_gives_the_node_back_on_close(
    server: EmbeddedValkey, admin: Connector, queue_name: str
) -> None:
    queue = await Queue.connect(server.url, queue_name, events=False)
    assert not queue.minter.is_ready, "a consumer that never mints holds no node"
    verdict = await queue.enqueue("x")
    assert verdict.kind == "enqueued"
    node = queue.minter.node
    entry = (await admin.call("HGET", NODES_KEY, node)).decode()
    assert entry.startswith(queue.minter.lease.owner)  # type: ignore[union-attr]
    await queue.pause()
    await queue.obliterate(force=True)
    await queue.close()
    assert (await admin.call("HGET", NODES_KEY, node)).decode().startswith(":")
    explicit = Queue(queue_name, admin, minter=Minter(node=7))
    assert explicit.minter.is_ready
    assert (await explicit.enqueue_many([Item(1)]))[0].kind == "enqueued"
    await explicit.pause()
    await explicit.obliterate(force=True)

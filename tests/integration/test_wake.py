"""Parking on several wake lists (a sharded queue's, one per shard): one ``BLPOP`` over them all
on one server, a connection per list and a fan-in on a cluster."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from echomq import Job, Queue
from echomq.consumers.consumer import Consumer, ConsumerOptions
from echomq.consumers.metronome import Metronome
from echomq.consumers.wake import Wake
from echomq.engine.keys import Keyspace, slot
from echomq.errors import Closed
from echomq.server import EmbeddedCluster
from echomq.wire import cluster as cluster_wire
from echomq.wire.cluster import ClusterRouter
from echomq.wire.connector import Connector
from echomq.wire.pool import Pool, Wire
from echomq.wire.url import ConnectionOptions, seeds_from_url


@pytest.fixture(params=["one server", "cluster"])
async def lists(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Wire, list[str]]]:
    """A wire and three wake lists: of one hash tag on one server; on a cluster, of three tags
    on three primaries (a ``BLPOP`` may not span them)."""
    wire: Pool | ClusterRouter
    if request.param == "one server":
        server = request.getfixturevalue("valkey_server")
        wire = await Pool(ConnectionOptions.from_url(server.url)).connect()
        tag = f"w-{uuid.uuid4().hex[:10]}"
        keys = [f"emq:{{{tag}}}:wake", f"emq:{{{tag}}}:wake-1", f"emq:{{{tag}}}:wake-2"]
    else:
        cluster: EmbeddedCluster = request.getfixturevalue("valkey_cluster")
        wire = await ClusterRouter(seeds_from_url(cluster.url)).connect()
        keys, primaries = [], sorted(wire.nodes)
        while len(keys) < 3:
            key = Keyspace(f"w-{uuid.uuid4().hex[:10]}").wake
            if wire.owner(slot(key)).address == primaries[len(keys)]:
                keys.append(key)
    yield wire, keys
    for key in keys:
        await wire.call("DEL", key)
    await wire.close()


async def parked(wake: Wake, ids: list[int]) -> None:
    """Until each of ``wake``'s connections (their client ids) is blocked in a ``BLPOP``."""
    deadline = time.monotonic() + 10
    for blocker, client in zip(wake.blockers, ids, strict=True):
        async with Connector(blocker.options, version_fence=None) as admin:
            while b"cmd=blpop" not in await admin.call("CLIENT", "LIST", "ID", client):
                assert time.monotonic() < deadline, "the wait never parked"
                await asyncio.sleep(0.01)


async def opened(wake: Wake) -> list[int]:
    assert await wake.open(lambda: False)
    return [await blocker.call("CLIENT", "ID") for blocker in wake.blockers]


async def test_a_token_on_any_list_wakes_the_wait_and_none_is_lost(
    lists: tuple[Wire, list[str]],
) -> None:
    wire, keys = lists
    tasks = asyncio.all_tasks()
    wake = Wake(wire, keys)
    ids = await opened(wake)
    assert len(wake.blockers) == (3 if isinstance(wire, ClusterRouter) else 1)
    for key in reversed(keys):  # each list alone wakes a parked wait, long before its timeout
        waiting = asyncio.ensure_future(wake.wait(30))
        await parked(wake, ids)
        await wire.call("LPUSH", key, "1")
        assert await asyncio.wait_for(waiting, 5) == [key.encode(), b"1"]
    # One token on each list while a wait is parked: three wakes, none dropped by a read that
    # popped its token after the wait had ended; then the fourth wait runs out with nothing.
    waiting = asyncio.ensure_future(wake.wait(30))
    await parked(wake, ids)
    for key in keys:
        await wire.call("LPUSH", key, "s")
    woken = [await asyncio.wait_for(waiting, 5)]
    woken += [await wake.wait(5) for _ in keys[1:]]
    assert sorted(token[0] for token in woken if token) == sorted(k.encode() for k in keys)
    started = time.monotonic()
    assert await wake.wait(0.2) is None
    assert 0.15 <= time.monotonic() - started < 3
    for key in keys:
        assert await wire.call("LLEN", key) == 0
    await wake.close()
    assert asyncio.all_tasks() == tasks  # no read left running


async def test_stop_aborts_a_parked_wait_at_once_and_close_leaves_nothing(
    lists: tuple[Wire, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    wire, keys = lists
    # Unthrottled: a map read the stop started would be counted, or still running at the end.
    monkeypatch.setattr(cluster_wire, "REFRESH_INTERVAL", 0.0)
    tasks = asyncio.all_tasks()
    wake = Wake(wire, keys)
    ids = await opened(wake)
    waiting = asyncio.ensure_future(wake.wait(30))
    await parked(wake, ids)
    refreshes = getattr(wire, "refreshes", 0)
    wake.stop()
    with pytest.raises(Closed):
        await asyncio.wait_for(waiting, 2)
    await wake.close()
    assert asyncio.all_tasks() == tasks
    assert getattr(wire, "refreshes", 0) == refreshes  # reads our own stop ended: map unchanged
    assert all(blocker._proto is None for blocker in wake.blockers)  # every socket closed


class ThreeLists(Queue):
    """A queue that parks on two more lists than its own, as a sharded queue does."""

    @property
    def wake_keys(self) -> tuple[str, ...]:
        return (self.keys.wake, f"{self.keys.root}wake-1", f"{self.keys.root}wake-2")


@pytest.mark.parametrize("pace", ["consumer", "metronome"])
async def test_consumers_and_the_metronome_park_on_every_wake_list(queue: Queue, pace: str) -> None:
    three = ThreeLists(queue.name, queue.wire)

    async def never(job: Job) -> None:
        raise AssertionError("nothing was enqueued")

    metronome = Metronome(three, beat=30, idle_upkeep=600) if pace == "metronome" else None
    consumer = Consumer(
        three, never, ConsumerOptions(beat=30, idle_upkeep=600), metronome=metronome
    )
    running = [asyncio.ensure_future(consumer.run())]
    if metronome is not None:
        running.append(asyncio.ensure_future(metronome.run()))
    while consumer.tally.claims < 1:  # the first claim finds nothing: it parks after it
        await asyncio.sleep(0.01)
    await queue.wire.call("LPUSH", three.wake_keys[2], "1")  # not the queue's own list
    deadline = time.monotonic() + 5  # the beat is 30 s: only the token wakes it
    while consumer.tally.claims < 2:
        assert time.monotonic() < deadline, "the token on the third list woke nobody"
        await asyncio.sleep(0.01)
    consumer.stop()
    if metronome is not None:
        metronome.stop()
    await asyncio.wait_for(asyncio.gather(*running), 5)
    await queue.wire.call("DEL", *three.wake_keys)
    await three.close()

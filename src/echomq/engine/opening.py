"""Opening a queue by its name alone, as an operator's tool does: the queue as its keys say it
is, a :class:`ShardedQueue` when its directory exists, else a plain :class:`Queue`; and the
blocking producer's twin, a :class:`ShardedSyncQueue` or a :class:`SyncQueue`
(docs/concepts/shards.md, "Using a sharded queue today"). One read at open; nothing per call
after it."""

from __future__ import annotations

from typing import Any

from echomq.engine.keys import Keyspace
from echomq.engine.queue import Queue
from echomq.engine.sharded import ShardedQueue
from echomq.engine.sharded_sync import ShardedSyncQueue
from echomq.engine.shards import read_map
from echomq.engine.sync_queue import SyncQueue
from echomq.wire.pool import Wire
from echomq.wire.url import ConnectionOptions, seeds_from_url


async def open_queue(name: str, wire: Wire, **options: Any) -> Queue:
    """The queue ``name`` on ``wire``, whatever its shape: a :class:`ShardedQueue` of the
    shards its directory names when it has one (one read of ``emq:{name}:shards``), else a
    :class:`Queue`. ``options`` are the queue's (``events``, ``result_ttl``, ``codec``, …).

    What the CLI, the dashboard and the metrics open a queue with: a sharded queue read as a
    plain ``Queue`` would be its shard 0 alone. A queue made sharded after this open is not
    seen as such by this object: open it again."""
    placement = await read_map(wire, Keyspace(name))
    if placement is None:
        return Queue(name, wire, **options)
    return ShardedQueue(placement, wire, **options)


async def connect_queue(
    url: str | ConnectionOptions, name: str, *, pool_size: int = 1, **options: Any
) -> Queue:
    """:func:`open_queue` on a pool (or a cluster router) opened to ``url``; the queue's
    ``close`` closes it, as :meth:`Queue.connect`'s does."""
    from echomq.wire.cluster import open_wire  # the router builds on the pool: imported late

    Keyspace(name)  # validates before connecting
    seeds = [url] if isinstance(url, ConnectionOptions) else seeds_from_url(url)
    wire = await open_wire(seeds, pool_size)
    try:
        queue = await open_queue(name, wire, **options)
        await queue.engine.check_persistence()  # a durability the server cannot give
    except BaseException:
        await wire.close()
        raise
    queue.take_wire()  # its close closes the wire (a sharded queue's after its shards)
    return queue


def connect_sync_queue(url: str | ConnectionOptions, name: str, **options: Any) -> SyncQueue:
    """:func:`connect_queue`, blocking: the queue ``name`` on ``url`` whatever its shape, a
    :class:`ShardedSyncQueue` of the shards its directory names when it has one, else a
    :class:`SyncQueue`. ``options`` are the queue's (``codec``, ``result_ttl``,
    ``durability``).

    What ``App.sync_queue`` (so ``task.enqueue_sync``) opens a queue the app was not told is
    sharded with: a :class:`SyncQueue` on a sharded queue's name would write every lane to its
    shard 0, unfenced. Either costs one read more at open, on the one connection the queue
    keeps (a sharded one takes the plain one's over: ``ShardedSyncQueue.taking_over``)."""
    queue = SyncQueue.connect(url, name, **options)
    try:
        placement = queue.read_placement()
        if placement is None:
            return queue
        return ShardedSyncQueue.taking_over(queue, placement)
    except BaseException:
        queue.close()
        raise

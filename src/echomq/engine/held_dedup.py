"""Admissions to a lane held for a move (docs/concepts/shards.md, "Dedup while a lane is held").
From the freeze on, the lane's target admits it, but until the copy ends the lane's jobs and
their dedup keys may still be on its source. So the target refuses an item whose key and id it
does not hold (:class:`~echomq.errors.LaneHeld`, naming the source); the producer reads the key,
and an id its caller gave, there and answers the item as the duplicate of the lane's job it
names, else sends it to the target again with them checked. Exact: from the freeze on the
source admits no job of the lane, and each of the lane's jobs and keys is on the source or on the
target at every instant (a batch is written on the target before it is deleted on the source),
so a key or id the source lacks when read is on the target when the item arrives there, or gone
with its job.
"""

from __future__ import annotations

from echomq.engine.keys import DEFAULT_GROUP
from echomq.engine.queue import Queue
from echomq.engine.results import JobInfo
from echomq.engine.sync_queue import SyncQueue
from echomq.errors import EchoMQError

#: An admission's reply, ``(code, id, state)``: here always a duplicate's (code 0).
Duplicate = tuple[int, str, str]


async def source_duplicate(
    source: Queue, lane: str, dedup: str | None, id: str | None
) -> Duplicate | EchoMQError | None:
    """The duplicate verdict's reply when ``source`` holds, for a job of ``lane``, the item's
    dedup key ``dedup`` or its id ``id`` (one its caller gave; a minted id is never there),
    looked for in that order, as the enqueue script does; else None. A durable queue covers
    the job it points at first (another connection wrote it: the mark's wait), its shortfall
    answered instead. ``source`` is read as the one shard it is (shard 0 of a sharded queue
    is the queue)."""
    found = None
    if dedup:
        job_id = await Queue.dedup_job(source, dedup)
        if job_id is not None:
            found = _duplicate(job_id, lane, await Queue.job(source, job_id))
    if found is None and id is not None:
        found = _duplicate(id, lane, await Queue.job(source, id))
    if found is None or source.durability is None:
        return found
    short = await source.engine.cover((found[1],))
    return found if short is None else short


def sync_source_duplicate(
    source: SyncQueue, lane: str, dedup: str | None, id: str | None
) -> Duplicate | EchoMQError | None:
    """:func:`source_duplicate` for the blocking producer."""
    found = None
    if dedup:
        job_id = SyncQueue.dedup_job(source, dedup)
        if job_id is not None:
            found = _duplicate(job_id, lane, SyncQueue.job(source, job_id))
    if found is None and id is not None:
        found = _duplicate(id, lane, SyncQueue.job(source, id))
    if found is None or source.durability is None:
        return found
    short = source.cover((found[1],))
    return found if short is None else short


def _duplicate(job_id: str, lane: str, row: JobInfo | None) -> Duplicate | None:
    # A key that outlived its row, or names a job of another lane, is left on the source, as
    # after the move (dedup across lanes of different shards is per shard).
    if row is None or (row.lane or DEFAULT_GROUP) != lane:
        return None
    return (0, job_id, row.state)

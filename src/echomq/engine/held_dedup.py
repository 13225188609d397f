"""Keyed admissions to a lane held for a move (docs/concepts/shards.md, "Dedup while a lane is
held"). From the freeze on, the lane's target admits it, but until the copy ends the lane's
dedup keys may still be on its source. So the target refuses a keyed item whose key it does not
hold (:class:`~echomq.errors.LaneHeld`, naming the source); the producer reads the key there and
answers the item as the duplicate of the lane's job it names, else sends it to the target again
with the key checked. Exact: from the freeze on the source admits no job of the lane, and each
of the lane's keys is on the source or on the target at every instant (a batch is written on the
target before it is deleted on the source), so a key the source lacks when read is on the
target when the item arrives there, or gone with its job.
"""

from __future__ import annotations

from echomq.engine.keys import DEFAULT_GROUP
from echomq.engine.queue import Queue
from echomq.engine.results import JobInfo
from echomq.engine.sync_queue import SyncQueue

#: An admission's reply, ``(code, id, state)``: here always a duplicate's (code 0).
Duplicate = tuple[int, str, str]


async def source_duplicate(source: Queue, lane: str, dedup: str) -> Duplicate | None:
    """The duplicate verdict's reply when ``source`` holds ``dedup`` for a job of ``lane``
    (one read, two when it holds the key), else None."""
    job_id = await source.dedup_job(dedup)
    return None if job_id is None else _duplicate(job_id, lane, await source.job(job_id))


def sync_source_duplicate(source: SyncQueue, lane: str, dedup: str) -> Duplicate | None:
    """:func:`source_duplicate` for the blocking producer."""
    job_id = source.dedup_job(dedup)
    return None if job_id is None else _duplicate(job_id, lane, source.job(job_id))


def _duplicate(job_id: str, lane: str, row: JobInfo | None) -> Duplicate | None:
    # A key that outlived its row, or names a job of another lane, is left on the source, as
    # after the move (dedup across lanes of different shards is per shard).
    if row is None or (row.lane or DEFAULT_GROUP) != lane:
        return None
    return (0, job_id, row.state)

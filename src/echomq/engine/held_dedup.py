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

import asyncio
from typing import TYPE_CHECKING, Any

from echomq.engine.checks import text
from echomq.engine.keys import DEFAULT_GROUP
from echomq.engine.options import Admission, JobOptions
from echomq.engine.producer import admission_verdict
from echomq.engine.queue import Queue
from echomq.engine.results import Verdict
from echomq.errors import LaneHeld
from echomq.wire.blocking import error_of, pack

if TYPE_CHECKING:
    from echomq.engine.sharded import ShardedQueue
    from echomq.engine.sync_queue import SyncQueue

#: An admission's reply, ``(code, id, state)``: here always a duplicate's (code 0).
Duplicate = tuple[int, str, str]


async def admit_held(
    queue: ShardedQueue, shard: Queue, held: LaneHeld, payload: Any, options: JobOptions
) -> Verdict:
    """The verdict of an item ``shard`` refused ``held``: the duplicate of the job its key
    names on the lane's source, else ``shard``'s answer to it sent again, checked."""
    assert options.dedup_key is not None  # only a keyed item is refused held
    found = await source_duplicate(queue.shards[held.shard], held.lane, options.dedup_key)
    if found is not None:
        return admission_verdict(*found)
    return await Queue._admit(shard, payload, options, checked=True)


async def answer_held(
    queue: ShardedQueue, admissions: list[Admission], replies: list[Any], shards: list[int]
) -> None:
    """In ``replies`` (``admissions[i]`` sent to shard ``shards[i]``), each :class:`LaneHeld`
    refusal replaced as :func:`admit_held` says: the sources read at once, the items sent
    again at once."""
    held = [i for i, reply in enumerate(replies) if isinstance(reply, LaneHeld)]
    if not held:
        return
    founds = await asyncio.gather(
        *(
            source_duplicate(
                queue.shards[replies[i].shard], admissions[i].group, admissions[i].dedup
            )
            for i in held
        )
    )
    unknown: list[int] = []  # keys the lanes' sources do not hold
    for i, found in zip(held, founds, strict=True):
        if found is None:
            unknown.append(i)
        else:
            replies[i] = found
    answers = await queue._scatter(
        [admissions[i] for i in unknown],
        [shards[i] for i in unknown],
        lambda shard, items: Queue._enqueue_admissions(shard, items, checked=True),
    )
    for i, answer in zip(unknown, answers, strict=True):
        replies[i] = answer


async def source_duplicate(source: Queue, lane: str, dedup: str) -> Duplicate | None:
    """The duplicate verdict's reply when ``source`` holds ``dedup`` for a job of ``lane``
    (one read, two when it holds the key), else None."""
    seen = await source.wire.call("GET", source.keys.dedup(dedup))
    if seen is None:
        return None
    job_id = text(seen)
    group, state = await source.wire.call("HMGET", source.keys.job(job_id), "group", "state")
    return _duplicate(job_id, lane, group, state)


def sync_source_duplicate(source: SyncQueue, lane: str, dedup: str) -> Duplicate | None:
    """:func:`source_duplicate` for the blocking producer."""
    router = source._here().router
    (seen,) = router.call_each(source._slot, [pack(("GET", source.keys.dedup(dedup)))])
    if isinstance(seen := error_of(seen), Exception):
        raise seen
    if seen is None:
        return None
    job_id = text(seen)
    command = pack(("HMGET", source.keys.job(job_id), "group", "state"))
    (row,) = router.call_each(source._slot, [command])
    if isinstance(row := error_of(row), Exception):
        raise row
    group, state = row
    return _duplicate(job_id, lane, group, state)


def _duplicate(job_id: str, lane: str, group: object, state: object) -> Duplicate | None:
    # A key that outlived its row, or names a job of another lane, is left on the source, as
    # after the move (dedup across lanes of different shards is per shard).
    if state is None or text(group or DEFAULT_GROUP) != lane:
        return None
    return (0, job_id, text(state))

"""Where each job of a sharded queue lives: the shard that leased it here (remembered for
settles by id), else the shard whose row holds it; and the verbs that name a job by id alone,
run on that shard (a mixin of :class:`~echomq.engine.sharded.ShardedQueue`,
docs/concepts/shards.md)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from echomq.engine import ids as _ids
from echomq.engine.keys import validate_dedup
from echomq.engine.queue import Queue
from echomq.engine.results import Job, JobInfo, JobState

if TYPE_CHECKING:
    pass

#: Leased job ids remembered with their shard, for settles by id (beyond it, the oldest go:
#: a settle by an id forgotten reads every shard once to find it).
HELD_KEPT: Final = 65_536


class JobsAcrossShards:
    """The by-id verbs of a sharded queue, each on the shard that holds the job."""

    shards: tuple[Queue, ...]
    _held: dict[str, int]

    if TYPE_CHECKING:  # AcrossShards' (declared only: a definition here would hide it)

        async def _current(self) -> None:
            """Take on the shards another process added."""

    def _remember(self, jobs: Sequence[Job]) -> None:
        held = self._held
        for job in jobs:
            held[job.id] = job.shard
        if len(held) > HELD_KEPT:
            for old in list(itertools.islice(held, len(held) - HELD_KEPT)):
                del held[old]

    async def _shard_of_id(self, job_id: str) -> Queue:
        """The shard for a settle of job ``job_id`` by id: the one that leased it here (its
        lease is there, or lost), else the one that holds its row."""
        return self.shards[(await self._shards_of_ids([job_id]))[0]]

    async def _shards_of_ids(self, job_ids: Sequence[str]) -> list[int]:
        """:meth:`_shard_of_id` of each id, the ones not leased here found together: one read
        of the directory's epoch, then one pipelined ``EXISTS`` per shard for them all."""
        held = self._held
        found = [held.get(job_id) for job_id in job_ids]
        unknown = [job_ids[i] for i, k in enumerate(found) if k is None]
        if unknown:
            rows = iter(await self._rows_of(unknown))
            found = [k if k is not None else next(rows)[0] for k in found]
        return [k for k in found if k is not None]

    async def _rows_of(self, job_ids: Sequence[str]) -> list[list[int]]:
        """For each of ``job_ids``, the shards whose row of it exists (two while its lane
        moves; every shard there is now, a grow by another process included), else [0]."""
        await self._current()
        hits = await asyncio.gather(
            *(
                shard.wire.call_many([("EXISTS", shard.keys.job(i)) for i in job_ids])
                for shard in self.shards
            )
        )
        return [
            [k for k, per_shard in enumerate(hits) if per_shard[i]] or [0]
            for i in range(len(job_ids))
        ]

    async def _found(self, id: str) -> Queue:
        """The shard that holds job ``id`` now (a read of every shard: a job this process
        leased may have been reaped and its lane moved since), else shard 0 ("no such job")."""
        return (await self._holding(_ids.validate(id, "JOB", "job id")))[0]

    async def _shard_of(self, job: Job | str) -> Queue:
        if isinstance(job, Job):
            return self.shards[job.shard]
        return await self._shard_of_id(_ids.validate(job, "JOB", "job id"))

    def _settled(self, job_ids: Iterable[str]) -> None:
        held = self._held
        for job_id in job_ids:
            held.pop(job_id, None)

    async def wait(self, id: str, timeout: float | None = None) -> JobInfo | None:
        return await Queue.wait(await self._found(id), id, timeout)

    async def job(self, id: str) -> JobInfo | None:
        return await Queue.job(await self._found(id), id)

    async def dedup_job(self, key: str) -> str | None:
        """The job ``key`` maps to, every shard read: a lane's keys live on its shard (while the
        lane moves, on both, naming the same job). Dedup is per shard, so one key sent with
        lanes on two shards may name a job on each: the first shard's, in shard order."""
        validate_dedup(key)
        await self._current()
        found = await asyncio.gather(*(Queue.dedup_job(s, key) for s in self.shards))
        return next((job_id for job_id in found if job_id is not None), None)

    async def state(self, id: str) -> JobState:
        return await Queue.state(await self._found(id), id)

    async def cancel(self, id: str, reason: str = "") -> Any:
        """Cancel job ``id`` on its shard; while its lane moves, on both shards that hold it
        (its copy must not run where it goes): the answer is its shard's, in shard order."""
        outcomes = [await Queue.cancel(s, id, reason) for s in await self._holding(id)]
        return outcomes[0]

    async def remove(self, id: str) -> bool:
        """Remove job ``id`` from its shard (both shards while its lane moves)."""
        return any([await Queue.remove(shard, id) for shard in await self._holding(id)])

    async def _holding(self, id: str) -> list[Queue]:
        """The shards whose row of job ``id`` exists (two while its lane moves; every shard
        there is now, a grow by another process included), else shard 0. Not the shard that
        leased it here: its lease may have been reaped and its lane moved since."""
        _ids.validate(id, "JOB", "job id")
        return [self.shards[k] for k in (await self._rows_of([id]))[0]]

    async def position(self, id: str) -> Any:
        return await Queue.position(await self._found(id), id)

    async def logs(self, id: str, limit: int = 100) -> list[str]:
        return await Queue.logs(await self._found(id), id, limit)

    async def progress(self, job: Job | str, *args: Any, **kwargs: Any) -> Any:
        return await Queue.progress(await self._shard_of(job), job, *args, **kwargs)

    async def reassign(self, id: str, lane: str | None = None, *, group: str | None = None) -> bool:
        """Move a pending job to another lane of the same shard; a lane on another shard is
        refused (:class:`LaneMoved`, from the shard's fence): moving jobs between shards is
        a lane move's work."""
        shard = await self._found(id)
        return await Queue.reassign(shard, id, lane, group=group)

"""The settles of a sharded queue, each on the shard that leased the job (``Job.shard``, or for
a job named by id alone the shard found for it), a batch split by shard and its parts sent at
once (a mixin of :class:`~echomq.engine.sharded.ShardedQueue`, docs/concepts/shards.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from echomq.engine import ids as _ids
from echomq.engine.queue import Queue
from echomq.engine.results import Completed, CompleteOutcome, Failed, Job, RetryOutcome
from echomq.engine.transitions import Success

_T = TypeVar("_T")


class SettlesAcrossShards:
    """The settle verbs of a sharded queue, each on the job's shard (mixed into
    ``ShardedQueue``)."""

    shards: tuple[Queue, ...]

    if TYPE_CHECKING:  # the queue's own (declared only: a definition here would hide them)

        def encode_result(self, result: Any) -> bytes: ...

        async def _shard_of(self, job: Job | str) -> Queue: ...

        async def _shards_of_ids(self, job_ids: Sequence[str]) -> list[int]: ...

        def _settled(self, job_ids: Iterable[str]) -> None: ...

        async def _scatter(
            self,
            items: list[_T],
            shards: list[int],
            call: Callable[[Queue, list[_T]], Awaitable[list[Any]]],
        ) -> list[Any]: ...

    async def complete(
        self, job: Job | str, token: int | None = None, *, result: Any = None
    ) -> bool:
        shard = await self._shard_of(job)
        done = await Queue.complete(shard, job, token, result=result)
        self._settled([job.id if isinstance(job, Job) else job])
        return done

    async def complete_each(self, jobs: Iterable[Job | Completed]) -> list[CompleteOutcome]:
        successes: list[Success] = []
        shards: list[int] = []
        for item in jobs:
            job, result = (item.job, item.result) if isinstance(item, Completed) else (item, None)
            successes.append(Success(job.id, job.attempts, self.encode_result(result)))
            shards.append(job.shard)
        return await self._each(successes, shards, Queue.complete_encoded)

    async def complete_encoded(self, successes: list[Success]) -> list[CompleteOutcome]:
        shards = await self._shards_of_ids([success.id for success in successes])
        return await self._each(successes, shards, Queue.complete_encoded)

    async def retry(
        self,
        job: Job | str,
        token: int | None = None,
        *,
        delay: float = 0.0,
        max_attempts: int = 3,
        error: str = "",
        traceback: str | None = None,
    ) -> Literal["scheduled", "dead", "cancelled", "gone"]:
        shard = await self._shard_of(job)
        outcome = await Queue.retry(
            shard,
            job,
            token,
            delay=delay,
            max_attempts=max_attempts,
            error=error,
            traceback=traceback,
        )
        self._settled([job.id if isinstance(job, Job) else job])
        return outcome

    async def retry_each(self, failures: Iterable[Failed]) -> list[RetryOutcome]:
        items = list(failures)
        return await self._each(items, [f.job.shard for f in items], Queue.retry_each)

    async def delay(self, job: Job | str, token: int | None = None, *, delay: float) -> bool:
        shard = await self._shard_of(job)
        done = await Queue.delay(shard, job, token, delay=delay)
        self._settled([job.id if isinstance(job, Job) else job])
        return done

    async def cool(
        self,
        job: Job | str,
        token: int | None = None,
        *,
        after: float | None = None,
        until: float | None = None,
        lane: str = "_",
    ) -> bool:
        shard = await self._shard_of(job)
        done = await Queue.cool(shard, job, token, after=after, until=until, lane=lane)
        self._settled([job.id if isinstance(job, Job) else job])
        return done

    async def extend(self, job: Job | str, token: int | None = None, *, lease: float) -> bool:
        shard = await self._shard_of(job)
        return await Queue.extend(shard, job, token, lease=lease)

    async def extend_many(
        self, jobs: Iterable[Job | tuple[str, int]], *, lease: float
    ) -> list[str]:
        items = list(jobs)
        by_id = iter(
            await self._shards_of_ids(
                [_ids.validate(i[0], "JOB", "job id") for i in items if not isinstance(i, Job)]
            )
        )
        shards = [item.shard if isinstance(item, Job) else next(by_id) for item in items]
        by_shard: dict[int, list[Job | tuple[str, int]]] = {}
        for item, k in zip(items, shards, strict=True):
            by_shard.setdefault(k, []).append(item)
        lost = await asyncio.gather(
            *(Queue.extend_many(self.shards[k], part, lease=lease) for k, part in by_shard.items())
        )
        return [job_id for part in lost for job_id in part]

    async def _end_cancelled(self, job: Job) -> Any:
        self._settled([job.id])
        return await Queue._end_cancelled(self.shards[job.shard], job)

    async def _each(
        self,
        items: list[_T],
        shards: list[int],
        settle: Callable[[Queue, list[_T]], Awaitable[list[Any]]],
    ) -> list[Any]:
        """``settle`` each shard's part of ``items`` on it (the leases forgotten here)."""
        self._settled(_job_id(item) for item in items)
        return await self._scatter(items, shards, settle)


def _job_id(item: object) -> str:
    if isinstance(item, Job):
        return item.id
    if isinstance(item, Completed | Failed):
        return item.job.id
    assert isinstance(item, Success)
    return item.id

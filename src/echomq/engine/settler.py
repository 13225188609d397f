"""Coalesced settles: the jobs of one consumer that finish in the same event-loop tick are
completed in one ``complete_each`` call and retried in one ``retry_each`` call.

Each job is still fenced by its own token and gets its own outcome; the caller hears of it
through a callback, so a finished handler frees its slot at once and the next claim shares a
round trip with these settles.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from echomq.engine.results import CompleteOutcome, Failed, Job, RetryOutcome
from echomq.engine.transitions import Success
from echomq.errors import EchoMQError

if TYPE_CHECKING:
    from echomq.engine.queue import Queue

_Item = TypeVar("_Item", Success, Failed)
#: The longest handler run a complete tells the engine (complete.lua's bound), ms: 30 days.
MAX_RAN_MS = 2_592_000_000
_Subject = TypeVar("_Subject", Job, Failed)
_Outcome = TypeVar("_Outcome", CompleteOutcome, RetryOutcome)
OnCompleted = Callable[[Job, CompleteOutcome | EchoMQError], None]
OnRetried = Callable[[Failed, RetryOutcome | EchoMQError], None]


class Settler:
    """Buffers one tick's settles and sends each kind as one batch call."""

    def __init__(self, queue: Queue, on_completed: OnCompleted, on_retried: OnRetried) -> None:
        self._queue = queue
        self._on_completed = on_completed
        self._on_retried = on_retried
        #: The completed jobs and, index for index, each as complete.lua takes it (built as
        #: the job ends: no second pass over the batch at the flush).
        self._completes: list[Job] = []
        self._successes: list[Success] = []
        self._retries: list[Failed] = []
        self._is_scheduled = False
        self._sending: set[asyncio.Task[None]] = set()

    @property
    def pending(self) -> int:
        """Jobs waiting to be settled or being settled now."""
        return len(self._completes) + len(self._retries) + len(self._sending)

    def complete(self, job: Job, result: bytes = b"", ran_ms: int = 0) -> None:
        """Complete ``job`` with its result already encoded (``Queue.encode_result``) and the
        ms its handler ran (0: unmeasured; at most 30 days are told)."""
        self._completes.append(job)
        self._successes.append(Success(job.id, job.attempts, result, min(ran_ms, MAX_RAN_MS)))
        if not self._is_scheduled:
            self._schedule()

    def retry(self, failed: Failed) -> None:
        self._retries.append(failed)
        self._schedule()

    async def drain(self) -> None:
        """Wait until every settle handed over so far has its answer."""
        while self._is_scheduled or self._sending:
            if self._is_scheduled:
                await asyncio.sleep(0)  # the flush is due at the end of this tick
                continue
            await asyncio.wait(set(self._sending))

    def _schedule(self) -> None:
        if not self._is_scheduled:
            self._is_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._is_scheduled = False
        completes, self._completes = self._completes, []
        successes, self._successes = self._successes, []
        retries, self._retries = self._retries, []
        if completes:
            complete = self._queue.complete_encoded
            self._send(_answer(complete, successes, completes, self._on_completed))
        if retries:
            self._send(_answer(self._queue.retry_each, retries, retries, self._on_retried))

    def _send(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)


async def _answer(
    settle: Callable[[list[_Item]], Awaitable[Sequence[_Outcome]]],
    items: list[_Item],
    subjects: list[_Subject],
    report: Callable[[_Subject, _Outcome | EchoMQError], None],
) -> None:
    """One batch call of ``items``, then the outcome of each reported with its subject, the
    ``subjects`` being index for index (the call's failure for each)."""
    try:
        outcomes: Sequence[_Outcome | EchoMQError] = await settle(items)
    except EchoMQError as exc:
        outcomes = [exc] * len(items)
    for subject, outcome in zip(subjects, outcomes, strict=True):
        report(subject, outcome)

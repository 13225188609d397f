"""The admission verbs of a :class:`echomq.Queue`: admit one job or many (``enqueue``,
``enqueue_in``, ``enqueue_at``, ``enqueue_many`` and the task layer's ``admit`` and
``admit_many``), each batch one ``enqueue.lua`` call per chunk, traced when the application set
a tracer provider. Mixed into ``Queue``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from echomq.engine import ids as _ids
from echomq.engine.options import (
    DEFAULT_OPTIONS,
    Admission,
    JobOptions,
    admission,
    lane_alias,
    options_of,
    when_run_at,
)
from echomq.engine.producer import Batch, Item, admission_verdict
from echomq.engine.results import Verdict
from echomq.engine.shards import ShardMap
from echomq.engine.transitions import Engine
from echomq.errors import QueueSharded
from echomq.tracing import Sending, Spans, carriers_of, sending_many
from echomq.wire.codec import Codec


class Admissions:
    """Admitting jobs to a queue (mixed into :class:`Queue`)."""

    name: str
    codec: Codec
    minter: _ids.Minter
    engine: Engine
    placement: ShardMap | None
    spans: Spans
    _listened: Callable[[], bool]
    _emit: Callable[[Iterable[dict[str, Any]]], None]

    # -- admission -----------------------------------------------------------------------------

    def _mint(self) -> str:
        return self.minter.mint("JOB")

    async def admit(
        self, payload: Any, options: JobOptions = DEFAULT_OPTIONS, *, carries_context: bool = False
    ) -> Verdict:
        """Admit one job with its :class:`JobOptions` (the one path every enqueue takes:
        ``enqueue``, ``enqueue_in``, ``enqueue_at`` and the task layer). Idempotent by id and
        dedup key; a refused option raises :class:`InvalidArgument` naming it, before any write.

        Traced (a producer span) when the application set an OpenTelemetry tracer provider;
        ``carries_context``: ``payload`` is a dict of the caller's own making (the task layer's)
        and takes the span's W3C context, so the worker's span is its child."""
        tracer = self.spans.tracer()
        if tracer is None:
            return await self._admit(payload, options)
        carriers = (payload,) if carries_context else ()
        with Sending(tracer, self.name, options.lane, carriers) as sending:
            return sending.sent(await self._admit(payload, options))

    async def _admit(self, payload: Any, options: JobOptions, checked: bool = False) -> Verdict:
        """``checked``: on a shard, the fence says the item's dedup key and id were looked for
        on the source of its lane, held here for a move (docs/concepts/shards.md)."""
        if options.id is None and not self.minter.is_ready:
            await self.minter.ready()
        item = admission(self.codec, self._mint, payload, options)
        fence = None if self.placement is None else self.placement.fence((item.group,))
        if fence is not None and checked:
            fence = fence._replace(checked=True)
        code, job_id, state = await self.engine.enqueue_one(item, fence)
        verdict = admission_verdict(code, job_id, state)
        if code and self._listened():
            self._emit([{"event": verdict.kind, "job": job_id, "group": item.group}])
        return verdict

    async def enqueue(
        self,
        payload: Any,
        *,
        lane: str | None = None,
        id: str | None = None,
        dedup_key: str | None = None,
        dedup_ttl: float | None = None,
        dedup_from: str = "enqueue",
        result_ttl: float | None = None,
        priority: int | None = None,
        cost: int | None = None,
        group: str | None = None,
    ) -> Verdict:
        """Admit a job to its ``lane`` (default lane ``_``). Idempotent by id and dedup key.

        ``id`` must be a ``JOB`` branded id (minted when omitted). A ``dedup_key`` maps to the
        job for ``dedup_ttl`` seconds from now, whatever becomes of the job (completed, removed,
        drained); without ``dedup_ttl``, for as long as the job's row lives (a kept result too)
        and not past its death. ``dedup_from="finish"`` counts ``dedup_ttl`` from the job's end
        instead (completed, dead, cancelled or removed): "once per user for an hour after it
        ran". ``result_ttl`` (seconds, 0 … 30 days) keeps this job's completed row that long
        instead of the completing queue's ``result_ttl`` (docs/guides/results.md).
        ``priority`` (0..9, default 5) is the job's band: a more urgent band is served first
        (docs/guides/priorities-costs-cooling.md); ``cost`` (1..1000, default 1) the units it
        spends of its lane's and queue's budgets. ``group=`` is the deprecated name of
        ``lane=``. The same as :meth:`admit` with these options.
        """
        if group is not None:
            lane = lane_alias(lane, group)
        options = JobOptions(
            lane,
            id,
            dedup_key,
            dedup_ttl,
            dedup_from,
            None,
            None,
            result_ttl,
            priority=priority,
            cost=cost,
        )
        return await self.admit(payload, options)

    async def enqueue_in(self, delay: float, payload: Any, **options: Any) -> Verdict:
        """Admit a job that becomes claimable ``delay`` seconds from now (server clock);
        ``options`` are :meth:`enqueue`'s."""
        return await self.admit(payload, options_of(options, delay=delay))

    async def enqueue_at(self, when: float, payload: Any, **options: Any) -> Verdict:
        """Admit a job that becomes claimable at ``when`` (Unix seconds; a past ``when`` runs
        now). At most 10 years ahead; a millisecond timestamp is refused, not read as seconds."""
        when_run_at(when)  # refused as ``when``, the argument's name here
        return await self.admit(payload, options_of(options, at=when))

    async def enqueue_many(self, items: Iterable[Item | Any]) -> list[Verdict]:
        """Admit many jobs, one script call per chunk of 100, the chunks pipelined; one verdict
        per item, in input order.

        Each item is atomic and idempotent; the batch is not a transaction. An item that fails
        validation gets an ``error`` verdict and is not sent; the others are. When the
        connection drops mid-batch, the answered chunks keep their verdicts and the rest answer
        ``unknown`` (nothing is raised): send those again with their verdict's ``id``.
        """
        if not self.minter.is_ready:
            await self.minter.ready()
        tracer = self.spans.tracer()
        if tracer is None:
            return await self._send(Batch.plan(items, self.codec, self._mint))
        items = carriers_of(items)
        with sending_many(tracer, self.name, items, False) as sending:
            return sending.sent_many(await self._send(Batch.plan(items, self.codec, self._mint)))

    async def admit_many(
        self, jobs: Iterable[tuple[Any, JobOptions]], *, carries_context: bool = False
    ) -> list[Verdict]:
        """:meth:`enqueue_many` for ``(payload, options)`` pairs: the batch form of
        :meth:`admit` (the task layer's path), with the same verdicts; one producer span for
        the batch (``carries_context`` as :meth:`admit`'s, for every payload)."""
        if not self.minter.is_ready:
            await self.minter.ready()
        tracer = self.spans.tracer()
        if tracer is None:
            return await self._send(Batch.pairs(jobs, self.codec, self._mint))
        jobs = carriers_of(jobs)
        with sending_many(tracer, self.name, jobs, carries_context) as sending:
            return sending.sent_many(await self._send(Batch.pairs(jobs, self.codec, self._mint)))

    async def _send(self, batch: Batch) -> list[Verdict]:
        """A planned batch sent: its verdicts in input order."""
        admissions = batch.admissions
        replies = await self._enqueue_admissions(admissions) if admissions else []
        if replies and isinstance(replies[0], QueueSharded):
            raise replies[0]  # every chunk refused whole: the queue is the wrong one, not an item
        verdicts = batch.settle(replies)
        if self._listened():
            self._emit(
                {"event": v.kind, "job": v.id}
                for v in verdicts
                if v.kind in ("enqueued", "scheduled")
            )
        return verdicts

    async def _enqueue_admissions(
        self, admissions: list[Admission], checked: bool = False
    ) -> list[Any]:
        """The script's reply per item (a shard's call fenced by its placement; ``checked``:
        as :meth:`_admit`'s)."""
        fence = None
        if self.placement is not None:
            fence = self.placement.fence(item.group for item in admissions)._replace(
                checked=checked
            )
        return await self.engine.enqueue(admissions, fence)

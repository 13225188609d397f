"""Cancelling jobs: the reason's bound, the :class:`Queue` verbs (``Queue(Settles, Reports,
Cancels)``) and the cancel hub, through which the engine tells a worker process that a job it
holds was cancelled.

A cancel of a pending or scheduled job ends it at once (cancel.lua). A leased job is marked,
and cancel.lua announces its id on the queue's shard channel ``emq:{q}:cancel``; every queue
object that runs consumers subscribes to it once (:class:`CancelHub`, like the waiter hub) and
hands the id to the consumer holding the job, which stops the handler and ends the job with its
token. A job whose holder never hears it ends cancelled when its lease expires (the reaper),
and a failure of a marked job is not retried.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Literal

from echomq.engine import ids as _ids
from echomq.engine.checks import text, utf8_size
from echomq.engine.events import ShardChannel
from echomq.engine.keys import Keyspace
from echomq.engine.producer import job_state
from echomq.engine.results import Cancellation, Job
from echomq.engine.transitions import Engine
from echomq.errors import EchoMQError, InvalidArgument
from echomq.wire.pool import Wire

#: The longest cancel reason (UTF-8 bytes).
MAX_REASON: Final = 256
#: Ids heard on the channel before their holder registered them (a claim's reply and the
#: channel's message travel on different sockets), kept so the holder still hears them.
HEARD_KEPT: Final = 1024

EndOutcome = Literal["cancelled", "gone", "stale", "settled"]
_ENDED: dict[int, EndOutcome] = {1: "cancelled", 0: "gone", -1: "stale", -2: "settled"}


def cancel_reason(reason: object) -> str:
    """``reason`` as cancel.lua keeps it: a str of at most ``MAX_REASON`` UTF-8 bytes."""
    if not isinstance(reason, str):
        raise InvalidArgument("reason", reason, f"must be a str, got {type(reason).__name__}")
    size = utf8_size(reason, "reason")
    if size > MAX_REASON:
        raise InvalidArgument("reason", f"<{size} bytes>", f"must be at most {MAX_REASON} bytes")
    return reason


def cancellation(job_id: str, was: str) -> Cancellation:
    """cancel.lua's answer (the state the job was in, "" for none) as a :class:`Cancellation`."""
    return Cancellation(job_id, job_state(was.encode() if was else None))


def cancel_events(answer: Cancellation, reason: str) -> list[dict[str, Any]]:
    """The events a cancel publishes: ``cancelled`` (it ended now), ``cancelling`` (its holder
    was told), none for a finished or unknown job."""
    if answer.outcome == "cancelled" or answer.outcome == "requested":
        kind = "cancelled" if answer.outcome == "cancelled" else "cancelling"
        return [{"event": kind, "job": answer.id, "reason": reason}]
    return []


class Cancels:
    """Cancelling jobs (mixed into :class:`Queue`)."""

    engine: Engine
    result_ttl_ms: int
    cancel_hub: CancelHub
    _listened: Callable[[], bool]
    _emit: Callable[[Iterable[dict[str, Any]]], None]

    async def cancel(self, id: str, reason: str = "") -> Cancellation:
        """Cancel job ``id``; nothing runs it again, and it ends ``cancelled``.

        A pending or scheduled job is cancelled at once (taken out of its lane or the
        schedule). A leased job is marked and the worker holding it is told through the
        engine: it cancels the handler within a beat (a handler inside ``echomq.shielded()``
        at the block's end) and ends the job; a handler that finished first completes, and an
        attempt that fails is not retried. A finished or unknown job is left as it is. The
        answer says which happened (:class:`Cancellation`), never an error. A cancelled row is
        kept like a result (``result_ttl``; 0 deletes it), with ``reason`` (at most 256 bytes)
        as its ``cancel``; waits on it end.
        """
        job_id = _ids.validate(id, "JOB", "job id")
        why = cancel_reason(reason)
        answer = cancellation(job_id, await self.engine.cancel(job_id, why, self.result_ttl_ms))
        events = cancel_events(answer, why)
        if events and self._listened():
            self._emit(events)
        return answer

    async def _end_cancelled(self, job: Job) -> EndOutcome:
        """The holder ends its job as cancelled (the mark's reason kept), fenced by its token."""
        code = await self.engine.cancel_held(job.id, job.attempts, self.result_ttl_ms)
        outcome = _ENDED[code]
        if outcome == "cancelled" and self._listened():
            self._emit([{"event": "cancelled", "job": job.id}])
        return outcome


Abort = Callable[[], None]


class _CancelChannel(ShardChannel):
    """The subscription, its messages and confirmations handed to the hub (no inbox)."""

    def __init__(self, hub: CancelHub, wire: Wire, channel: str) -> None:
        self._hub = hub
        super().__init__(wire, channel)

    def _deliver(self, message: bytes) -> None:
        self._hub.heard(text(message))

    def _confirmed(self) -> None:
        # Messages may have been missed while unsubscribed: ask the rows of the held jobs.
        if self._hub.holders:
            self._start(self._hub.reconcile())


class CancelHub:
    """The consumers of one queue object on one subscription to its ``cancel`` channel,
    opened by the first consumer that runs and closed when the last one ends."""

    def __init__(self, wire: Wire, keys: Keyspace) -> None:
        self._wire = wire
        self._keys = keys
        #: job id -> what stops its handler (one holder per job in this process)
        self.holders: dict[str, Abort] = {}
        self._heard: OrderedDict[str, None] = OrderedDict()
        self._subscription: _CancelChannel | None = None
        self._users = 0
        self._lock = asyncio.Lock()

    def hold(self, job_id: str, abort: Abort) -> None:
        """``abort`` stops ``job_id``'s handler when a cancel of it is heard (at once if one
        was heard before the job's claim reply arrived)."""
        if job_id in self._heard:
            del self._heard[job_id]
            abort()
            return
        self.holders[job_id] = abort

    def drop(self, job_id: str) -> None:
        """The handler of ``job_id`` ended: a cancel heard later is the engine's to settle."""
        self.holders.pop(job_id, None)

    def heard(self, job_id: str) -> None:
        abort = self.holders.pop(job_id, None)
        if abort is not None:
            abort()
            return
        self._heard[job_id] = None
        if len(self._heard) > HEARD_KEPT:
            self._heard.popitem(last=False)

    async def reconcile(self) -> None:
        """Stop the held jobs whose rows a cancel marked (after a re-subscription)."""
        held = list(self.holders)
        try:
            marks = await self._wire.call_many(
                [("HEXISTS", self._keys.job(job_id), "cancel") for job_id in held]
            )
        except EchoMQError:
            return  # the socket is down again: the next confirmation asks again
        for job_id, marked in zip(held, marks, strict=True):
            if marked == 1:
                self.heard(job_id)

    async def open(self) -> None:
        """One more consumer uses the hub: subscribe at the first, confirmed before return."""
        async with self._lock:
            self._users += 1
            if self._subscription is not None:
                return
            subscription = _CancelChannel(self, self._wire, self._keys.cancel)
            try:
                await subscription.open()
            except BaseException:
                self._users -= 1
                raise
            self._subscription = subscription

    async def release(self) -> None:
        """A consumer is done with the hub; the last one closes the subscription."""
        async with self._lock:
            self._users = max(0, self._users - 1)
            if self._users == 0:
                await self.close()

    async def close(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            await subscription.close()

    def __repr__(self) -> str:
        return f"CancelHub({self._keys.queue!r}, held={len(self.holders)})"


class CancelHubs(CancelHub):
    """The cancel hubs of a sharded queue's shards as one (itself shard 0's): a consumer
    holding a job is told of its cancel on whichever shard's channel it comes (each shard
    announces its own jobs)."""

    def __init__(self, wire: Wire, keys: Keyspace, others: Sequence[CancelHub]) -> None:
        super().__init__(wire, keys)
        self._hubs: list[CancelHub] = [self, *others]
        self._joining: list[CancelHub] = []  # joined, not yet opened as often as this one

    def join(self, others: Sequence[CancelHub]) -> None:
        """The hubs of shards the queue gained (a grow): told of every job held from now on,
        and subscribed at :meth:`catch_up`."""
        self._hubs += others
        self._joining += others

    async def catch_up(self) -> None:
        """Open the joined hubs once for each open of this one still in force (a consumer's),
        so they are released and closed with the others."""
        joining, self._joining = self._joining, []
        for _ in range(self._users):
            await asyncio.gather(*(CancelHub.open(hub) for hub in joining))

    def hold(self, job_id: str, abort: Abort) -> None:
        for hub in self._hubs:
            CancelHub.hold(hub, job_id, abort)

    def drop(self, job_id: str) -> None:
        for hub in self._hubs:
            CancelHub.drop(hub, job_id)

    async def open(self) -> None:
        await asyncio.gather(*(CancelHub.open(hub) for hub in self._hubs))

    async def release(self) -> None:
        await asyncio.gather(*(CancelHub.release(hub) for hub in self._hubs))

    async def close(self) -> None:
        await asyncio.gather(*(CancelHub.close(hub) for hub in self._hubs))

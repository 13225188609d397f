"""The waiter hub: what :meth:`Queue.wait` waits on — one sharded subscription to the queue's
``done`` channel, shared by every wait of the queue, on a connection of its own.

The scripts announce each completion, burial and deleted row there (``SPUBLISH emq:{q}:done
<id>``; the wildcard ``*`` from obliterate and large drains: every waited row); a wait reads the
job's row after the subscription is confirmed, and again on each message for its id or the
wildcard and after every re-subscription (a lost socket, a slot that moved), so a job that
finished or was deleted before the wait, or while the socket was down, is never missed. Nothing
polls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from echomq.engine.checks import text
from echomq.engine.events import ShardChannel, Subscription
from echomq.engine.keys import DONE_WILDCARD
from echomq.engine.results import FINISHED, JobInfo
from echomq.errors import Closed, Disconnected, WireTimeout
from echomq.wire.pool import Wire

WILDCARD: Final = DONE_WILDCARD.encode()

Read = Callable[[str], Awaitable[JobInfo | None]]

#: The first pause before a read cut by a dropped socket is tried again; doubled up to the cap.
RETRY_START = 0.05
RETRY_CAP = 1.0

T = TypeVar("T")


async def through_cuts(attempt: Callable[[], Awaitable[T]], deadline: float | None) -> T:
    """``attempt()``, tried again after a dropped socket or a reconnect still under way, until
    ``deadline`` (loop time; None: no limit). Only for calls that change nothing (reads, a
    subscription), which are safe to repeat.

    A wait is long-lived by nature: a cut in its middle is an ordinary event, not an answer.
    The last wire error is raised once the deadline has passed.
    """
    loop = asyncio.get_running_loop()
    pause = RETRY_START
    while True:
        try:
            return await attempt()
        except (Disconnected, WireTimeout):
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                raise
            # A short pause before the next try: the connector's own reconnect is under way,
            # and a call issued now would only wait for it (or fail the same way).
            await asyncio.sleep(pause if left is None else min(pause, left))
            pause = min(pause * 2, RETRY_CAP)


class _DoneChannel(ShardChannel):
    """The subscription, its messages and confirmations handed to the hub (no inbox)."""

    def __init__(self, hub: WaiterHub, wire: Wire, channel: str) -> None:
        self._hub = hub
        super().__init__(wire, channel)

    def _deliver(self, message: bytes) -> None:
        if message == WILDCARD:
            self._hub.wake_all()  # rows were deleted in bulk: every wait reads its row again
        else:
            self._hub.finished(text(message))

    def _confirmed(self) -> None:
        self._hub.wake_all()  # messages may have been missed while unsubscribed: read again


class WaiterHub:
    """Every wait of one queue on one subscription, opened at the first wait."""

    def __init__(self, wire: Wire, channel: str, read: Read) -> None:
        self._wire = wire
        self.channel = channel
        self._read = read
        #: job id -> the events of the waits on it (several waits may share an id)
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._subscription: _DoneChannel | None = None
        self._opening: asyncio.Future[_DoneChannel] | None = None
        self._is_closed = False

    @property
    def waits(self) -> int:
        """Waits in progress."""
        return sum(len(events) for events in self._waiters.values())

    @property
    def subscription(self) -> Subscription | None:
        """The shared subscription, once the first wait opened it."""
        return self._subscription

    def finished(self, job_id: str) -> None:
        """A message: ``job_id`` completed, went dead or its row was deleted."""
        for event in self._waiters.get(job_id, ()):
            event.set()

    def wake_all(self) -> None:
        """Every wait reads its row again (a re-subscription, the wildcard, the close)."""
        for events in self._waiters.values():
            for event in events:
                event.set()

    async def wait(self, job_id: str, timeout: float | None) -> JobInfo | None:
        """The row once ``job_id`` is completed or dead; None when the row is absent, or when
        ``timeout`` seconds pass first."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        event = asyncio.Event()
        # Registered before the first read: a message between the read and the wait is kept.
        self._waiters.setdefault(job_id, set()).add(event)
        try:
            await through_cuts(self._subscribed, deadline)
            while True:
                event.clear()
                info = await through_cuts(lambda: self._read(job_id), deadline)
                if info is None or info.state in FINISHED:
                    return info
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    return None
                try:
                    await asyncio.wait_for(event.wait(), left)
                except TimeoutError:
                    return None
                if self._is_closed:
                    raise Closed(f"the queue closed while waiting for {job_id}")
        finally:
            events = self._waiters.get(job_id)
            if events is not None:
                events.discard(event)
                if not events:
                    del self._waiters[job_id]

    async def _subscribed(self) -> None:
        """Until the subscription is confirmed the first time (later ones reconnect alone)."""
        if self._subscription is not None:
            return
        if self._is_closed:
            raise Closed("the queue is closed")
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open())
        opening = self._opening
        try:
            await asyncio.shield(opening)
        except BaseException:
            if opening.done() and self._opening is opening:
                self._opening = None  # failed: the next wait tries again
            raise

    async def _open(self) -> _DoneChannel:
        subscription = _DoneChannel(self, self._wire, self.channel)
        await subscription.open()
        if self._is_closed:
            await subscription.close()
            raise Closed("the queue is closed")
        self._subscription = subscription
        return subscription

    async def close(self) -> None:
        """Close the subscription; waits in progress raise :class:`Closed`."""
        self._is_closed = True
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
        if self._subscription is not None:
            await self._subscription.close()
            self._subscription = None
        self.wake_all()

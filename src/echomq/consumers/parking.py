"""Where an idle claim loop waits for work. :class:`Parking` is a ``BLPOP`` on the queue's
wake list, on a connection of its own (never the pool's), for at most the wait its loop asks
(the beat, or less when an upkeep falls due sooner); under a
:class:`~echomq.consumers.metronome.Metronome` it is the metronome's poke instead (one
``BLPOP`` and one upkeep per beat for a pool). A stop aborts a parked read at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from echomq.consumers.cadence import SCHEDULED_TOKEN, Cadence
from echomq.errors import EchoMQError, WireError
from echomq.wire.connector import Connector
from echomq.wire.pool import dedicated

if TYPE_CHECKING:
    from echomq.consumers.metronome import Metronome
    from echomq.engine.queue import Queue

log = logging.getLogger("echomq.consumer")


class Parking:
    """The wake list of ``queue`` (or ``metronome``'s pokes) for the loop named ``name``;
    ``stopping`` is the loop's stop, set before :meth:`stop` is called."""

    def __init__(
        self,
        queue: Queue,
        cadence: Cadence,
        name: str,
        stopping: asyncio.Event,
        metronome: Metronome | None = None,
    ) -> None:
        self.queue = queue
        self.cadence = cadence
        self.name = name
        self.metronome = metronome
        self._stopping = stopping
        self._poked = asyncio.Event()
        self._seen = 0  # the metronome's poke round before the last claim
        self._blocker: Connector | None = None
        self._closing: asyncio.Future[None] | None = None

    async def open(self) -> bool:
        """Connect the wake connection (none under a metronome); False when a stop closed it
        while it was being made: the loop then ends with nothing claimed."""
        if self.metronome is not None:
            return True
        self._blocker = dedicated(self.queue.wire, self.queue.keys.wake)
        return await open_wake(self._blocker, self._stopping.is_set)

    def poke(self) -> None:
        """The metronome's go-ahead: claim once."""
        self._poked.set()

    def stop(self) -> None:
        """Abort a parked wait now rather than at the end of its beat."""
        self._poked.set()
        if self._blocker is not None:
            self._closing = asyncio.ensure_future(self._blocker.close())

    def claiming(self) -> None:
        """A claim is about to go out: under a metronome, note its poke round, so a round that
        goes by during the claim is not missed when the loop parks after it."""
        if self.metronome is not None:
            self._seen = self.metronome.generation

    async def poked(self) -> None:
        """Under a metronome: wait for its poke (at once when a round went by since the last
        claim)."""
        assert self.metronome is not None
        self._poked.clear()
        self.metronome.register(self, self._seen)
        await self._poked.wait()

    async def wait(self, timeout: float) -> bool:
        """Block on the wake list for at most ``timeout`` seconds. True when a token came, or
        the read failed (logged): worth a claim; False when the wait ran out."""
        timeout = max(timeout, 0.001)
        assert self._blocker is not None
        try:
            token = await self._blocker.call_blocking(
                timeout, "BLPOP", self.queue.keys.wake, f"{timeout:.3f}"
            )
        except EchoMQError as exc:
            if not self._stopping.is_set():
                log.warning("%s: parking on %s failed: %s", self.name, self.queue.name, exc)
                await sleep_unless(self._stopping, min(timeout, 1.0))
            return True
        if token is not None and token[1] == SCHEDULED_TOKEN:
            self.cadence.soon(time.monotonic())  # a job was scheduled: learn when it falls due
        return token is not None

    async def close(self) -> None:
        """Close the wake connection (idempotent), a close the stop began included."""
        if self._closing is not None:
            await self._closing
        if self._blocker is not None:
            await self._blocker.close()


async def open_wake(blocker: Connector, is_stopping: Callable[[], bool]) -> bool:
    """Connect a loop's wake connection; False when a stop closed it while it was being made
    (a worker stopped at once, as a burst worker on an idle queue is): the loop then ends with
    nothing claimed, where the connect's ``Closed`` used to escape ``run``."""
    try:
        await blocker.connect()
    except WireError:
        if not is_stopping():
            raise
    if is_stopping():  # a stop during the connect, or between its last step and here
        await blocker.close()  # idempotent: the socket is gone when the loop returns
        return False
    return True


async def sleep_unless(stopping: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``stopping`` is set meanwhile."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)

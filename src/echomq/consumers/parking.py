"""Where an idle claim loop waits for work. :class:`Parking` is a ``BLPOP`` on the queue's
wake lists (a :class:`~echomq.consumers.wake.Wake`), on a connection of its own (never the
pool's; one per list for a sharded queue on a cluster), for at most the wait its loop asks
(the beat, or less when an upkeep falls due sooner); under a
:class:`~echomq.consumers.metronome.Metronome` it is the metronome's poke instead (one
``BLPOP`` and one upkeep per beat for a pool). A stop aborts a parked read at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from echomq.consumers.cadence import SCHEDULED_TOKEN, Cadence
from echomq.consumers.wake import Wake
from echomq.errors import EchoMQError

if TYPE_CHECKING:
    from echomq.consumers.metronome import Metronome
    from echomq.engine.queue import Queue

log = logging.getLogger("echomq.consumer")


class Parking:
    """The wake lists of ``queue`` (or ``metronome``'s pokes) for the loop named ``name``;
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
        self._wake: Wake | None = None

    async def open(self) -> bool:
        """Connect the wake connections (none under a metronome); False when a stop closed them
        while they were being made: the loop then ends with nothing claimed."""
        if self.metronome is not None:
            return True
        queue = self.queue
        self._wake = Wake(queue.wire, queue.wake_keys, lambda: queue.wake_keys)
        return await self._wake.open(self._stopping.is_set)

    def poke(self) -> None:
        """The metronome's go-ahead: claim once."""
        self._poked.set()

    def stop(self) -> None:
        """Abort a parked wait now rather than at the end of its beat."""
        self._poked.set()
        if self._wake is not None:
            self._wake.stop()

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
        """Block on the wake lists for at most ``timeout`` seconds. True when a token came, or
        the read failed (logged): worth a claim; False when the wait ran out."""
        timeout = max(timeout, 0.001)
        assert self._wake is not None
        try:
            token = await self._wake.wait(timeout)
        except EchoMQError as exc:
            if not self._stopping.is_set():
                log.warning("%s: parking on %s failed: %s", self.name, self.queue.name, exc)
                await sleep_unless(self._stopping, min(timeout, 1.0))
            return True
        if token is not None and token[1] == SCHEDULED_TOKEN:
            self.cadence.soon(time.monotonic())  # a job was scheduled: learn when it falls due
        return token is not None

    async def close(self) -> None:
        """Close the wake connections (idempotent), a close the stop began included."""
        if self._wake is not None:
            await self._wake.close()


async def sleep_unless(stopping: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less when ``stopping`` is set meanwhile."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)

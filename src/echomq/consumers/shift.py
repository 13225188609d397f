"""A claim loop's shift, from its start to its stop: the parts every claim loop is made of
(:class:`~echomq.consumers.parking.Parking`, :class:`~echomq.consumers.leases.Leases`, the
:class:`~echomq.consumers.ledger.Ledger`), the tasks it has in hand, and one stop for all."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from echomq.consumers.leases import Holding, Leases
from echomq.consumers.ledger import Ledger, Observer
from echomq.consumers.parking import Parking, sleep_unless

if TYPE_CHECKING:
    from echomq.consumers.cadence import Cadence
    from echomq.consumers.metronome import Metronome
    from echomq.consumers.options import ConsumerOptions
    from echomq.engine.queue import Queue


class Shift:
    """The parts of the loop named ``name`` on ``queue``, shaped by ``options``."""

    def __init__(
        self,
        queue: Queue,
        options: ConsumerOptions,
        name: str,
        cadence: Cadence,
        observer: Observer | None = None,
        metronome: Metronome | None = None,
    ) -> None:
        self.stopping = asyncio.Event()
        #: The tasks in hand, each with its holding: the loop adds a task as it starts it
        #: (``running[task] = (leases.due(now), jobs)``); the task calls :meth:`free` as it
        #: ends (one scheduled callback fewer per job than a done callback).
        self.running: dict[asyncio.Task[None], Holding] = {}
        self.parking = Parking(queue, cadence, name, self.stopping, metronome)
        self.leases = Leases(queue, options.lease, options.beat, name, self.running)
        self.ledger = Ledger(queue, name, cadence, observer, options.lease)
        self.stop_timeout = options.stop_timeout
        self._freed = asyncio.Event()
        self._keeper: asyncio.Future[None] | None = None

    async def begin(self) -> bool:
        """Open the wake connection and start keeping leases; False, with nothing opened, when
        the loop was stopped first."""
        if self.stopping.is_set() or not await self.parking.open():
            return False
        self._keeper = asyncio.ensure_future(self.leases.keep())
        return True

    def stop(self) -> None:
        """Claim nothing more: the loop sees it at its next step, a parked wait ends now."""
        self.stopping.set()
        self.parking.stop()
        self._freed.set()  # a loop waiting for a slot looks again

    def free(self, task: asyncio.Task[None] | None) -> None:
        """``task`` ended: its slot frees and its jobs' leases are no longer kept."""
        self.running.pop(task, None)  # type: ignore[arg-type]
        self._freed.set()

    async def wait_for_slot(self) -> None:
        """Until a slot frees or a stop (each sets the event): one wait, no tasks."""
        if self.stopping.is_set():
            return
        self._freed.clear()
        await self._freed.wait()

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when the loop is stopped meanwhile."""
        await sleep_unless(self.stopping, seconds)

    async def end(self) -> None:
        """Once the loop left its last step: stop keeping leases; let the tasks in hand finish
        within ``stop_timeout`` and cancel the late (their leases expire and their jobs are
        reaped: not lost); wait for every settle's answer; close the wake connection."""
        if self._keeper is not None:
            self._keeper.cancel()
        if self.running:
            tasks = list(self.running)
            _, late = await asyncio.wait(tasks, timeout=self.stop_timeout)
            for task in late:
                task.cancel()  # its leases expire and its jobs are reaped: not lost
            if late:
                await asyncio.wait(late)
        await self.ledger.drain()
        await self.parking.close()

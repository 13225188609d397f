"""Lease keeping: the jobs a claim loop holds, and one call every so often that extends the
leases of every holding past a third of its lease (a job, or all the members of a batch: they
share one new deadline). Measured on this host's monotonic clock from the claim: no
host/server clock mixing."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

from echomq.engine.results import Job
from echomq.errors import EchoMQError

if TYPE_CHECKING:
    from echomq.engine.queue import Queue

log = logging.getLogger("echomq.consumer")


class Leases:
    """The holdings of one loop on ``queue``, each under a key of the loop's choosing."""

    def __init__(self, queue: Queue, lease: float, beat: float, name: str) -> None:
        self.queue = queue
        self.lease = lease
        self.beat = beat
        self.name = name
        self._third = lease / 3  # a lease is extended once a third of it went by
        # Each holding's jobs, and when (monotonic) their lease is next due for extension.
        self._held: dict[Hashable, tuple[float, Sequence[Job]]] = {}

    def hold(self, key: Hashable, jobs: Sequence[Job]) -> None:
        """Hold ``jobs`` from now on: claimed now, or about to be. A list may grow while it
        is held (a batch that gathers): each extension takes what it holds then."""
        self._held[key] = (time.monotonic() + self._third, jobs)

    def release(self, key: Hashable) -> None:
        self._held.pop(key, None)

    @property
    def jobs(self) -> int:
        """Jobs held, in every holding."""
        return sum(len(jobs) for _, jobs in self._held.values())

    async def keep(self) -> None:
        """Extend, in one call a round, the leases of the holdings due; until cancelled."""
        third = self._third
        while True:
            await asyncio.sleep(min(third, self.beat))
            now = time.monotonic()
            due = {key: jobs for key, (at, jobs) in self._held.items() if at <= now and jobs}
            if not due:
                continue
            extended = [job for jobs in due.values() for job in jobs]
            try:
                lost = await self.queue.extend_many(extended, lease=self.lease)
            except EchoMQError as exc:
                log.warning("%s: extending leases failed: %s", self.name, exc)
                continue
            for key, jobs in due.items():
                if key in self._held:
                    # A lease the call could not extend moved on for good (another claim
                    # holds the job, or it ended): asking again would not bring it back.
                    self._held[key] = (now + third, jobs)
            if lost:
                log.warning("%s: %d leases could not be extended", self.name, len(lost))

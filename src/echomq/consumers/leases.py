"""Lease keeping: the jobs a claim loop holds, and one call every so often that extends the
leases of every holding past a third of its lease (a job, or all the members of a batch: they
share one new deadline). Measured on this host's monotonic clock from the claim: no
host/server clock mixing."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Hashable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from echomq.engine.results import Job
from echomq.errors import EchoMQError

if TYPE_CHECKING:
    from echomq.engine.queue import Queue

log = logging.getLogger("echomq.consumer")

#: What one holding holds: when (monotonic) its lease is next due for extension, and its jobs
#: (a list may grow while it is held: a batch that gathers; each extension takes what it holds).
Holding = tuple[float, Sequence[Job]]


class Leases:
    """The holdings of one loop on ``queue``: ``running``, the tasks in hand, each with its
    holding (the loop writes it as it starts a task and removes it as the task ends, the
    cheapest a job's start and end can be), and the holdings of no task yet (:meth:`hold`)."""

    def __init__(
        self,
        queue: Queue,
        lease: float,
        beat: float,
        name: str,
        running: dict[asyncio.Task[None], Holding],
    ) -> None:
        self.queue = queue
        self.lease = lease
        self.beat = beat
        self.name = name
        self.third = lease / 3  # a lease is extended once a third of it went by
        self.running = running
        self._gathering: dict[Hashable, Holding] = {}

    def due(self, now: float) -> float:
        """When the lease of jobs claimed at ``now`` is first due for extension."""
        return now + self.third

    def hold(self, key: Hashable, jobs: Sequence[Job]) -> None:
        """Hold ``jobs`` under ``key`` from now on, before any task runs them (a batch that
        gathers); :meth:`release` hands the holding over."""
        self._gathering[key] = (self.due(time.monotonic()), jobs)

    def release(self, key: Hashable) -> Holding | None:
        """Stop holding ``key``: its holding, for a task that runs its jobs now."""
        return self._gathering.pop(key, None)

    @property
    def jobs(self) -> int:
        """Jobs held, in every holding."""
        holdings = (*self.running.values(), *self._gathering.values())
        return sum(len(jobs) for _, jobs in holdings)

    async def keep(self) -> None:
        """Extend, in one call a round, the leases of the holdings due; until cancelled."""
        third = self.third
        while True:
            await asyncio.sleep(min(third, self.beat))
            now = time.monotonic()
            places: tuple[MutableMapping[Any, Holding], ...] = (self.running, self._gathering)
            due = [
                (place, key, jobs)
                for place in places
                for key, (at, jobs) in place.items()
                if at <= now and jobs
            ]
            if not due:
                continue
            extended = [job for _, _, jobs in due for job in jobs]
            try:
                lost = await self.queue.extend_many(extended, lease=self.lease)
            except EchoMQError as exc:
                log.warning("%s: extending leases failed: %s", self.name, exc)
                continue
            for place, key, jobs in due:
                if key in place:
                    # A lease the call could not extend moved on for good (another claim
                    # holds the job, or it ended): asking again would not bring it back.
                    place[key] = (now + third, jobs)
            if lost:
                log.warning("%s: %d leases could not be extended", self.name, len(lost))

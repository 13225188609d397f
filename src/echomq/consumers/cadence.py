"""When a queue's upkeep (promote + reap) is next worth a round trip.

The upkeep answers how long until the next scheduled job, lease deadline or benched lane falls
due, so an idle consumer runs it then, not every beat; it still runs at least every
``idle_every`` seconds, which bounds how late a crashed worker's expired lease is reaped.
Every claim loop runs its upkeep through :func:`upkeep_if_due`.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

from echomq.engine.results import Upkeep
from echomq.errors import EchoMQError

if TYPE_CHECKING:
    from echomq.consumers.options import ConsumerOptions
    from echomq.engine.queue import Queue

log = logging.getLogger("echomq.consumer")

#: Slack added to a server-reported due time, so the upkeep lands after it, not just before.
_SLACK = 0.002
#: The wake token a scheduled admission pushes: "something new is waiting on time".
SCHEDULED_TOKEN = b"s"


class Cadence:
    def __init__(self, beat: float, idle_every: float) -> None:
        self.beat = beat
        self.idle_every = idle_every
        self.next_at = 0.0
        # The earliest request (soon) made since the running upkeep started: that upkeep may
        # have read the schedule before the request's write, so its answer cannot cover it.
        self._asked = math.inf

    def is_due(self, now: float) -> bool:
        return now >= self.next_at

    def begin(self) -> None:
        """An upkeep is about to read the queue."""
        self._asked = math.inf

    def ran(self, started: float, upkeep: Upkeep) -> None:
        """The upkeep that started at ``started`` answered."""
        wait = self.idle_every
        if upkeep.next_due is not None:
            wait = min(wait, upkeep.next_due + _SLACK)
        self.next_at = min(started + wait, self._asked)

    def soon(self, now: float, delay: float = 0.0) -> None:
        """Something falls due ``delay`` seconds from now (a retry we scheduled, a token)."""
        at = now + delay + (_SLACK if delay else 0.0)
        self.next_at = min(self.next_at, at)
        self._asked = min(self._asked, at)

    def park_for(self, now: float) -> float:
        """How long a parked reader may block: until the upkeep is due, at most a beat."""
        return max(0.0, min(self.beat, self.next_at - now))


async def upkeep_if_due(
    queue: Queue, cadence: Cadence, options: ConsumerOptions, name: str
) -> Upkeep | None:
    """Run ``queue``'s upkeep when ``cadence`` says something may be due (or a completion left
    flow entries for the relay); what it did, or None when it did not run or failed (logged,
    and tried again within a beat). Every claim loop runs its upkeep through here."""
    now = time.monotonic()
    if queue.relay_due:  # a flow parent on another queue waits for this upkeep's relay
        cadence.soon(now)
    if not cadence.is_due(now):
        return None
    cadence.begin()
    try:
        done = await queue.upkeep(max_stalled=options.max_stalled)
    except EchoMQError as exc:
        log.warning("%s: upkeep of %s failed: %s", name, queue.name, exc)
        cadence.soon(now, options.beat)
        return None
    cadence.ran(now, done)
    return done

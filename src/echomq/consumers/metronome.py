"""The metronome: one blocking read and one upkeep per beat for a pool of consumers.

N consumers blocking on the same wake list would each hold a connection and each run the
queue's upkeep every beat. With a metronome, one task owns the single ``BLPOP`` (on the
queue's wake lists: a :class:`~echomq.consumers.wake.Wake`) and the beat;
idle consumers register with it, and on each wake it pokes every registered consumer to claim
exactly once. A consumer that registers while a poke round happened during its claim is poked
at once (the round's generation tells), so no wake is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Protocol

from echomq.consumers.cadence import SCHEDULED_TOKEN, Cadence
from echomq.consumers.wake import Wake
from echomq.engine.checks import ms
from echomq.errors import EchoMQError

if TYPE_CHECKING:
    from echomq.engine.queue import Queue

log = logging.getLogger("echomq.metronome")


class Idle(Protocol):
    """What registers with a metronome: a consumer's parking, poked to claim once."""

    def poke(self) -> None: ...


class Metronome:
    """Owns the wake lists and the beat of one queue for the consumers that register with it."""

    def __init__(
        self,
        queue: Queue,
        *,
        beat: float = 1.0,
        max_stalled: int = 3,
        idle_upkeep: float = 10.0,
    ) -> None:
        ms(beat, "beat", positive=True)
        self.queue = queue
        self.beat = beat
        self.max_stalled = max_stalled
        self.cadence = Cadence(beat, idle_upkeep)
        self.generation = 0  # poke rounds so far
        self.wakes = 0
        self._idle: list[Idle] = []  # longest idle first, no duplicates
        self._registered = asyncio.Event()
        self._stopping = False
        self._wake: Wake | None = None

    def register(self, consumer: Idle, seen: int | None = None) -> None:
        """An idle consumer asks to be poked at the next wake or beat.

        ``seen`` is the generation it read before its (empty) claim: if a round went by since,
        it is poked now instead of waiting for the next one.
        """
        if seen is not None and seen < self.generation:
            consumer.poke()
            return
        if consumer not in self._idle:
            self._idle.append(consumer)
            self._registered.set()

    def stop(self) -> None:
        self._stopping = True
        for consumer in self._idle:
            consumer.poke()
        self._idle.clear()
        self._registered.set()  # a run waiting for a registration (nobody idle) ends now
        if self._wake is not None:
            self._wake.stop()

    async def run(self) -> None:
        if self._stopping:
            return
        queue = self.queue
        self._wake = wake = Wake(queue.wire, queue.wake_keys, lambda: queue.wake_keys)
        if not await wake.open(lambda: self._stopping):
            return
        found_work = False  # the last upkeep made something claimable
        try:
            while not self._stopping:
                if self.cadence.is_due(now := time.monotonic()):
                    self.cadence.begin()
                    try:
                        done = await self.queue.upkeep(max_stalled=self.max_stalled)
                    except EchoMQError as exc:
                        log.warning("upkeep of %s failed: %s", self.queue.name, exc)
                        self.cadence.soon(now, self.beat)
                    else:
                        self.cadence.ran(now, done)
                        found_work = found_work or done.found_work
                if found_work and self._idle:
                    found_work = False
                    self._poke_round()
                timeout = self.cadence.park_for(time.monotonic())
                if not self._idle:
                    # Nobody to poke: a wake token would be wasted, so wait for a registration.
                    self._registered.clear()
                    if self._stopping:  # a stop during the upkeep above: its set is cleared
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._registered.wait(), timeout)
                    continue
                timeout = max(0.001, timeout)
                try:
                    token = await wake.wait(timeout)
                except EchoMQError as exc:
                    if self._stopping:
                        return
                    log.warning("metronome read on %s failed: %s", self.queue.name, exc)
                    await asyncio.sleep(min(timeout, 1.0))
                    continue
                if token is None:
                    continue
                self.wakes += 1
                if token[1] == SCHEDULED_TOKEN:
                    self.cadence.soon(time.monotonic())
                self._poke_round()
        finally:
            await wake.close()

    def _poke_round(self) -> None:
        """One claim authorisation per idle consumer, longest idle first."""
        self.generation += 1
        idle, self._idle = self._idle, []
        for consumer in idle:
            consumer.poke()

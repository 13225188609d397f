"""The scheduler loop every AppWorker process runs, with no leader: every scheduler enqueues
every tick of its schedules, under an id derived from the schedule's name and the tick, so all
but the first attempt answer ``duplicate``. The last enqueued tick of each schedule is kept in
the engine (``emq:{q}:periodic``): that is how a restarted scheduler knows what it missed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from echomq.engine.keys import DEFAULT_GROUP
from echomq.engine.results import Verdict
from echomq.tasks.periodic import Schedule, missed_tick

if TYPE_CHECKING:
    from echomq.engine.queue import Queue
    from echomq.tasks.app import App

log = logging.getLogger("echomq.tasks")

#: Seconds a scheduler waits after a failed round (the engine unreachable, say).
RETRY_AFTER = 1.0


class Scheduler:
    """The scheduler loop of one worker process: one coroutine per schedule, each asleep until
    its next tick (server clock, ``TIME``), until :meth:`stop`."""

    def __init__(self, app: App, schedules: list[Schedule]) -> None:
        self.app = app
        self.schedules = schedules
        self._stopping = asyncio.Event()
        self._runs: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._runs = [asyncio.ensure_future(self._run(s)) for s in self.schedules]

    def stop(self) -> None:
        self._stopping.set()

    async def close(self) -> None:
        """Stop and wait for every loop (one in the middle of an enqueue is cancelled: a
        repeated attempt is a duplicate)."""
        self.stop()
        for run in self._runs:
            run.cancel()
        for run in self._runs:
            with contextlib.suppress(asyncio.CancelledError):
                await run

    async def _run(self, schedule: Schedule) -> None:
        queue = self.app.queue(schedule.queue)
        planned: int | None = None
        while not self._stopping.is_set():
            try:
                now = await _server_ms(queue)
                wait = 0 if planned is None else planned - now
                if wait <= 0:
                    tick, planned = await self._round(queue, schedule, now, planned)
                    if tick is not None:
                        await self.enqueue(queue, schedule, tick)
                    wait = planned - now
            except Exception:
                log.exception("schedule %s: a round failed; trying again", schedule.name)
                wait = round(RETRY_AFTER * 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), wait / 1000)

    async def _round(
        self, queue: Queue, schedule: Schedule, now: int, planned: int | None
    ) -> tuple[int | None, int]:
        """The tick to enqueue now (if any) and the next tick to wake for."""
        due = schedule.at_or_before(now)
        upcoming = schedule.after(now)
        if planned is not None and due == planned:
            return planned, upcoming  # the tick this loop slept toward: on time
        last = await queue.wire.call("HGET", queue.keys.periodic, schedule.name)
        recorded = None if last is None else int(last)
        return missed_tick(schedule.missed, due, recorded, planned), upcoming

    async def enqueue(self, queue: Queue, schedule: Schedule, tick: int) -> Verdict:
        """Admit the occurrence at ``tick``: an ordinary enqueue (its lane's gates apply), with
        the derived id and the tick's dedup key; then record the tick as the last enqueued."""
        call = schedule.call  # its lane is the schedule's
        await self.app.producer.configure_lane(queue, call)
        id, key = schedule.id_at(tick), schedule.dedup_key(tick)
        options = call.options._replace(
            dedup_key=key, dedup_ttl=schedule.dedup_ttl, dedup_from="enqueue"
        )
        verdict = await queue.admit(call.payload, options._replace(id=id), carries_context=True)
        held = queue.keys_of(call.lane or DEFAULT_GROUP).dedup(key)  # on the lane's shard
        if (
            verdict.kind == "duplicate"
            and verdict.id == id
            and not await queue.wire.call("EXISTS", held)
        ):
            # The row is another schedule's (their names' hashes met at this tick): a minted
            # id, under this tick's dedup key, so the other schedulers still agree on it.
            verdict = await queue.admit(call.payload, options, carries_context=True)
        if verdict.kind in ("enqueued", "scheduled"):
            await queue.wire.call("HSET", queue.keys.periodic, schedule.name, tick)
        return verdict


async def _server_ms(queue: Queue) -> int:
    seconds, micros = await queue.wire.call("TIME")
    return int(seconds) * 1000 + int(micros) // 1000

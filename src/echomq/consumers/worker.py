"""Running consumers as a process: load a handler by path, run K consumers (optionally under a
metronome), stop gracefully on SIGTERM/SIGINT, and log one line per failure plus a summary."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from echomq.consumers.consumer import Consumer, Handler
from echomq.consumers.ledger import Tally
from echomq.consumers.metronome import Metronome
from echomq.consumers.options import ConsumerOptions
from echomq.engine.checks import count
from echomq.engine.opening import connect_queue
from echomq.engine.queue import Queue
from echomq.errors import InvalidArgument

log = logging.getLogger("echomq.worker")


def load_target(spec: str) -> Any:
    """``package.module:name`` → the object it names; clear errors when it cannot be found."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidArgument(
            "handler", spec, "expected package.module:function (or package.module:app)"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgument("handler", spec, f"cannot import {module_name}: {exc}") from None
    target = getattr(module, attribute, None)
    if target is None:
        raise InvalidArgument("handler", spec, f"{module_name} has no attribute {attribute}")
    return target


def load_handler(spec: str) -> Handler:
    """``package.module:function`` → the async function; clear errors for anything else."""
    handler = load_target(spec)
    if not asyncio.iscoroutinefunction(handler):
        raise InvalidArgument("handler", spec, "must be an async function (async def)")
    return handler  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """A worker process: ``consumers`` consumers sharing a pool, each ``options``-shaped;
    ``metronome`` parks them on one blocking read, ``pool_size`` connections carry their
    calls, and a summary is logged every ``summary_every`` seconds."""

    consumers: int = 1
    metronome: bool = False
    pool_size: int = 1
    summary_every: float = 60.0

    def __post_init__(self) -> None:
        for name in ("consumers", "pool_size"):
            count(getattr(self, name), name)


class Worker:
    """K consumers on one queue in one process, with an optional metronome."""

    def __init__(
        self,
        queue: Queue,
        handler: Handler,
        options: ConsumerOptions | None = None,
        worker: WorkerOptions | None = None,
    ) -> None:
        self.queue = queue
        self.worker = worker or WorkerOptions()
        options = options or ConsumerOptions()
        self.metronome = (
            Metronome(
                queue,
                beat=options.beat,
                max_stalled=options.max_stalled,
                idle_upkeep=options.idle_upkeep,
            )
            if self.worker.metronome
            else None
        )
        self.consumers = [
            Consumer(queue, handler, options, metronome=self.metronome, name=f"consumer-{n}")
            for n in range(1, self.worker.consumers + 1)
        ]

    def stop(self) -> None:
        for consumer in self.consumers:
            consumer.stop()
        if self.metronome is not None:
            self.metronome.stop()

    def tally(self) -> Tally:
        total = Tally()
        for consumer in self.consumers:
            for field in ("completed", "retried", "dead", "cancelled", "lost", "claims"):
                setattr(total, field, getattr(total, field) + getattr(consumer.tally, field))
        return total

    async def run(self) -> Tally:
        summary = asyncio.ensure_future(self._summaries())
        beat = asyncio.ensure_future(self.metronome.run()) if self.metronome else None
        try:
            await asyncio.gather(*(consumer.run() for consumer in self.consumers))
        finally:
            summary.cancel()
            if beat is not None:
                self.metronome.stop()  # type: ignore[union-attr]
                await beat
        return self.tally()

    async def _summaries(self) -> None:
        while True:
            await asyncio.sleep(self.worker.summary_every)
            self._log_summary()

    def _log_summary(self) -> None:
        t = self.tally()
        in_flight = sum(consumer.in_flight for consumer in self.consumers)
        log.info(
            "%s: completed %d, retried %d, dead %d, lost leases %d, in flight %d",
            self.queue.name,
            t.completed,
            t.retried,
            t.dead,
            t.lost,
            in_flight,
        )


async def serve(
    url: str,
    queue_name: str,
    handler: Handler,
    options: ConsumerOptions | None = None,
    worker: WorkerOptions | None = None,
    *,
    on_ready: Callable[[], None] | None = None,
) -> Tally:
    """Run a worker until SIGTERM or SIGINT; jobs in hand finish first. Returns the tally.
    ``on_ready`` is called once it is connected and its consumers are about to claim."""
    worker = worker or WorkerOptions()
    # As its keys say: a sharded queue's every shard, not its shard 0 alone.
    queue = await connect_queue(url, queue_name, pool_size=worker.pool_size)
    runner = Worker(queue, handler, options, worker)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, runner.stop)
    try:
        if on_ready is not None:
            on_ready()
        tally = await runner.run()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        await queue.close()
    runner._log_summary()
    return tally

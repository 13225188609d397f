"""The wake lists a parked loop blocks on (``queue.wake_keys``: one for a queue, one per shard
for a sharded queue), on connections of their own, never the pool's.

One list, or several on one server (a pool or a connector: no slot rule): one connection and
one ``BLPOP k1 … kS timeout``. Several on a cluster, where a ``BLPOP`` may not span slots: one
connection per list, each following its list's slot, and a fan-in. Each list has at most one
``BLPOP`` in flight; a wait ends with the first token any of them pops, and the reads still in
flight carry over to the next wait, so a token popped after its wait ended is not lost: the
next wait takes it at once. A loop parks on one :class:`Wake` (its own, or its metronome's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from echomq.errors import InvalidArgument, WireError
from echomq.wire.connector import Connector
from echomq.wire.pool import Wire, dedicated


class Wake:
    """Blocking reads on ``keys`` (the wake lists) over ``wire``'s server or cluster.

    ``follow``, when given, is asked for the lists again at each wait (``queue.wake_keys``): a
    sharded queue that took new shards on (another process grew it) is heard on theirs too,
    from the next wait on. Lists are only ever added (a queue does not shrink)."""

    def __init__(
        self,
        wire: Wire,
        keys: Sequence[str],
        follow: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        if not keys:
            raise InvalidArgument("wake_keys", keys, "needs at least one wake list")
        self._wire = wire
        self._follow = follow
        self.keys = tuple(keys)
        #: A cluster router (``dedicated_for``) needs a connection per list; else one for all.
        self.fans_in = len(self.keys) > 1 and getattr(wire, "dedicated_for", None) is not None
        self.blockers: list[Connector] = [
            dedicated(wire, key) for key in (self.keys if self.fans_in else self.keys[:1])
        ]
        self._reads: dict[int, asyncio.Task[Any]] = {}  # list index → its BLPOP in flight
        self._closing: asyncio.Future[None] | None = None

    async def open(self, is_stopping: Callable[[], bool]) -> bool:
        """Connect; False when a stop closed the connections while they were being made (a
        worker stopped at once, as a burst worker on an idle queue is): the loop then ends with
        nothing claimed. A connect that fails otherwise closes them all and raises."""
        made = await asyncio.gather(
            *(blocker.connect() for blocker in self.blockers), return_exceptions=True
        )
        failed = [each for each in made if isinstance(each, BaseException)]
        stopped = is_stopping()  # a stop during the connect, or after its last step
        if failed or stopped:
            await self.close()  # idempotent: no socket is left when the loop returns
            if failed and not (stopped and all(isinstance(e, WireError) for e in failed)):
                raise failed[0]
            return False
        return True

    async def wait(self, timeout: float) -> list[Any] | None:
        """The first ``[key, token]`` a list gives within ``timeout`` seconds, or None when the
        wait ran out. Raises :class:`~echomq.errors.EchoMQError` when a read failed (``Closed``
        once :meth:`stop` closed the connections)."""
        timeout = max(timeout, 0.001)
        if self._follow is not None:
            await self._take_on(tuple(self._follow()))
        if not self.fans_in:
            token: list[Any] | None = await self.blockers[0].call_blocking(
                timeout, "BLPOP", *self.keys, f"{timeout:.3f}"
            )
            return token
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            done = [i for i, read in self._reads.items() if read.done()]
            if done:  # a token popped during an earlier wait counts first
                token = self._reads.pop(done[0]).result()  # raises what the read raised
                if token is not None:
                    return token
                continue  # that read ran out: read that list again while the wait lasts
            left = deadline - loop.time()
            if left <= 0:
                return None
            for i, (key, blocker) in enumerate(zip(self.keys, self.blockers, strict=True)):
                if i not in self._reads:
                    seconds = max(left, 0.001)  # "0.000" would block for ever
                    read = blocker.call_blocking(seconds, "BLPOP", key, f"{seconds:.3f}")
                    self._reads[i] = asyncio.ensure_future(read)
            await asyncio.wait(
                self._reads.values(), timeout=left, return_when=asyncio.FIRST_COMPLETED
            )

    async def _take_on(self, keys: tuple[str, ...]) -> None:
        """Block on ``keys`` from now on, when they add lists to those read now: on one
        server the one ``BLPOP`` names them all; on a cluster each new list has a connection
        of its own, connected here."""
        if len(keys) <= len(self.keys) or keys[: len(self.keys)] != self.keys:
            return
        if getattr(self._wire, "dedicated_for", None) is None:
            self.keys = keys
            return
        added = [dedicated(self._wire, key) for key in keys[len(self.blockers) :]]
        try:
            await asyncio.gather(*(blocker.connect() for blocker in added))
        finally:
            if self._closing is not None:  # a stop meanwhile: these close too, and the wait
                await asyncio.gather(*(blocker.close() for blocker in added))
        self.blockers += added
        self.keys = keys
        self.fans_in = True

    def stop(self) -> None:
        """Abort a parked wait now: the connections close, and the reads in flight with them."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_connections())

    async def close(self) -> None:
        """Close the connections (idempotent, a close :meth:`stop` began included), and end
        the reads in flight: no task and no socket is left."""
        self.stop()
        assert self._closing is not None
        await self._closing
        reads = list(self._reads.values())
        self._reads.clear()
        for read in reads:
            read.cancel()
        await asyncio.gather(*reads, return_exceptions=True)  # retrieved: nothing is logged

    async def _close_connections(self) -> None:
        await asyncio.gather(*(blocker.close() for blocker in self.blockers))

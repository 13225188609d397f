"""The placement lease of a sharded queue: one lane move or grow at a time (docs/concepts/shards.md,
"Changing S"). Two movers of one lane, two grows, or a grow and a move would interleave their
steps; each takes this lease first (``placing`` on shard 0, ``lua/placement_lease.lua``), and a
second is refused with :class:`~echomq.errors.PlacementBusy` naming the holder.

The holder extends its lease while it works (every third of its time to live) and releases it
at the end. A holder that died leaves it to expire: the next move or grow takes it and resumes
the work from what the shards and the directory record. A holder that finds its lease lost
(taken over), or whose extensions have not answered by the time it may have lapsed (its time to
live after the last answered one was sent), is stopped then, its work left as a stopped mover
leaves it, and raises ``PlacementBusy``.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from echomq.errors import EchoMQError, PlacementBusy

if TYPE_CHECKING:
    from echomq.engine.sharded import ShardedQueue

#: ms a holder's lease lasts past its last extension.
LEASE_MS: Final = 10_000


class PlacementLease:
    """``async with PlacementLease(queue, "grow to 5 shards"):`` the body runs holding the
    queue's placement lease, or :class:`PlacementBusy` is raised before it (nothing written)."""

    def __init__(self, queue: ShardedQueue, what: str, *, ttl_ms: int | None = None) -> None:
        self.queue = queue
        self.ttl_ms = LEASE_MS if ttl_ms is None else ttl_ms
        #: Who holds it, as a refusal names it.
        self.holder = f"{what} (host {socket.gethostname()}, pid {os.getpid()})"
        self._token = secrets.token_hex(8)
        self._keeper: asyncio.Task[None] | None = None
        self._lost: PlacementBusy | None = None

    async def _hold(self) -> list[Any]:
        registry = self.queue.scripts
        reply: list[Any] = await registry.run(
            self.queue.wire,
            registry.scripts["placement_lease"],
            (self.queue.keys.root, self.queue.keys.gate),
            ("hold", self._token, self.holder, self.ttl_ms),
        )
        return reply

    def _busy(self, reply: list[Any]) -> PlacementBusy:
        holder = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
        return PlacementBusy(self.queue.name, holder, max(int(reply[2]), 0) / 1000)

    async def __aenter__(self) -> PlacementLease:
        sent = asyncio.get_running_loop().time()
        reply = await self._hold()
        if not int(reply[0]):
            raise self._busy(reply)
        self._keeper = asyncio.create_task(self._keep(asyncio.current_task(), sent))
        return self

    async def _keep(self, worker: asyncio.Task[Any] | None, sent: float) -> None:
        """Extend the lease every third of its time to live; when it is lost, stop ``worker``.
        The lease may lapse on the server ``ttl`` after the last extension that answered was
        sent (not after its answer came): an extension that has not answered by then, or
        failed until then, stops ``worker`` at that instant, since another move or grow may
        hold the lease from then on."""
        loop = asyncio.get_running_loop()
        ttl = self.ttl_ms / 1000
        lapses = sent + ttl
        while True:
            await asyncio.sleep(max(0.0, min(ttl / 3, lapses - loop.time())))
            sent = loop.time()
            try:
                async with asyncio.timeout_at(lapses):
                    reply = await self._hold()
            except (EchoMQError, TimeoutError):  # out of reach: again until it may have lapsed
                if loop.time() < lapses:
                    continue
                reply = [0, f"no one known: {self.holder} could not extend it in time", 0]
            if int(reply[0]):
                lapses = sent + ttl
                continue
            self._lost = self._busy(reply)
            if worker is not None:
                worker.cancel()
            return

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
        lost = self._lost
        if lost is not None and isinstance(error, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # the keeper's cancel, not the caller's
            raise lost from None
        registry = self.queue.scripts
        try:
            await registry.run(
                self.queue.wire,
                registry.scripts["placement_lease"],
                (self.queue.keys.root, self.queue.keys.gate),
                ("release", self._token),
            )
        except EchoMQError:
            if error is None:
                raise
            # The body's own error says more; the lease expires by itself.

"""Node leases: the 10-bit node field of every id, leased from the engine so that every live
minter of a deployment holds a node of its own, with no configuration.

The lease lives in ``{emq}:nodes`` (``lua/node.lua``) on the server clock. A holder renews it
every ``ttl / 3`` and stops minting ``SAFETY`` seconds before it could have expired by its own
clock, so a node changes hands only after its old holder stopped; the lease's ceiling keeps the
new holder's ids above every id the old one minted, even when the two hosts' clocks disagree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any, Final

from echomq.engine.checks import ms
from echomq.engine.scripts import ScriptRegistry
from echomq.errors import EchoMQError, InvalidArgument, NodeLeaseError, Refusal

if TYPE_CHECKING:
    from echomq.engine.ids import Minter
    from echomq.wire.pool import Wire

log = logging.getLogger("echomq.ids")

#: The deployment-wide hash of node leases (its own hash tag, like ``{emq}:version``).
NODES_KEY: Final = "{emq}:nodes"
#: Seconds before a lease's end (by the holder's clock) at which the holder stops minting:
#: room for a renewal's round trip and for the two clocks running at slightly other rates.
SAFETY: Final = 5.0
#: Seconds of id timestamps a ceiling grants beyond the lease's end (mint bursts run ahead).
HEADROOM_MS: Final = 2_000


class NodeLease:
    """One minter's lease on a node: taken by :meth:`acquire`, renewed in the background."""

    def __init__(self, wire: Wire, minter: Minter, *, ttl: float = 30.0) -> None:
        if not isinstance(ttl, int | float) or isinstance(ttl, bool) or not 15 <= ttl <= 3600:
            raise InvalidArgument("ttl", ttl, "must be 15 to 3600 seconds")
        self.wire = wire
        self.minter = minter
        self.ttl = float(ttl)
        self._ttl_ms = ms(ttl, "ttl", positive=True)
        self.owner = secrets.token_hex(16)
        self.scripts = ScriptRegistry.from_package()
        self._script = self.scripts["node"]
        self._held = False
        self._lock = asyncio.Lock()
        self._keeper: asyncio.Task[None] | None = None

    def _ceiling(self) -> int:
        """The highest timestamp this holder may mint up to before its lease could end."""
        return max(self.minter.now_ts(), self.minter.last_ts()) + self._ttl_ms + HEADROOM_MS

    async def _call(self, op: str, node: int, ceiling: int) -> Any:
        start = secrets.randbelow(1024)
        args = (op, self.owner, node, self._ttl_ms, ceiling, start)
        return await self.scripts.run(self.wire, self._script, (NODES_KEY,), args)

    async def acquire(self) -> None:
        """Lease a node (the one held before, when still free) and start renewing it."""
        async with self._lock:
            if self.minter.is_ready:
                return
            preferred = self.minter.node if self._held else -1
            sent, ceiling = time.monotonic(), self._ceiling()
            try:
                granted = await self._call("lease", preferred, ceiling)
            except Refusal as exc:
                if exc.code == "EMQNODES":
                    raise NodeLeaseError(
                        "all 1024 id nodes of this deployment are leased by live minters: share "
                        "a minter between queues (Queue(..., minter=)), or pass explicit nodes"
                    ) from None
                raise
            node, floor = granted
            self.minter.grant(int(node), int(floor), ceiling, sent + self.ttl - SAFETY)
            self._held = True
            if int(floor) + self._ttl_ms > ceiling:
                # The last holder's clock ran ahead of ours: we mint above its ceiling, so ask
                # for a ceiling a lease's length above that.
                await self.renew()
            if self._keeper is None or self._keeper.done():
                self._keeper = asyncio.ensure_future(self._keep())

    async def renew(self) -> bool:
        """Extend the lease; False when it was lost (another minter holds the node now).
        The background keeper calls it under the lease's lock, as :meth:`acquire` does."""
        sent = time.monotonic()
        ceiling = self._ceiling()
        if not await self._call("renew", self.minter.node, ceiling):
            self.minter.lapse()
            return False
        self.minter.grant(self.minter.node, 0, ceiling, sent + self.ttl - SAFETY)
        return True

    async def _keep(self) -> None:
        every = self.ttl / 3
        while True:
            await asyncio.sleep(every)
            try:
                async with self._lock:  # never beside an acquire of the same minter
                    renewed = await self.renew()
                if not renewed:
                    log.warning("id node %d was taken over; leasing another", self.minter.node)
                    await self.acquire()
                every = self.ttl / 3
            except EchoMQError as exc:
                # Keep trying: the minter stops by itself once the lease could have ended.
                log.warning("id node lease renewal failed (%s); retrying in 1 s", exc)
                every = 1.0

    async def release(self) -> None:
        """Stop renewing and give the node back, recording the last timestamp minted."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        if not self._held:
            return
        self.minter.lapse()
        self._held = False
        with contextlib.suppress(EchoMQError):  # unreachable: the lease ends by itself
            await self._call("release", self.minter.node, max(self.minter.last_ts(), 0))

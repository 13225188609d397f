"""What one process holds for a blocking queue: :class:`SyncProcess`, its router (and every
thread's sockets, ``wire/blocking.py``) and :class:`SyncLease`, its lease on an id node, the
blocking twin of ``nodes.NodeLease``: renewed on the minting path rather than by a task. A
forked child builds its own (``SyncQueue`` notices the new pid); the parent's is never used there.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Sequence
from typing import Any

from echomq.engine import ids as _ids
from echomq.engine.checks import ms
from echomq.engine.keys import slot
from echomq.engine.nodes import HEADROOM_MS, NODES_KEY, SAFETY
from echomq.engine.scripts import ScriptRegistry
from echomq.errors import EchoMQError, NodeLeaseError, Refusal, ServerError
from echomq.wire.blocking import Router, error_of, pack
from echomq.wire.connector import WIRE_VERSION
from echomq.wire.url import ConnectionOptions

log = logging.getLogger("echomq.sync")

LEASE_TTL = 30.0


class SyncLease:
    """One process's lease on an id node (``lua/node.lua``), the blocking twin of ``NodeLease``:
    taken at the first mint, renewed by whichever thread mints once a third of its ttl passed,
    taken again after a lapse. The minter itself refuses to mint past the lease's safe end."""

    def __init__(self, router: Router, scripts: ScriptRegistry) -> None:
        self.router = router
        self.minter = _ids.Minter(0)
        self.minter.lapse()  # no node until the first lease
        self.owner = secrets.token_hex(16)
        self._script = scripts["node"]
        self._ttl_ms = ms(LEASE_TTL, "ttl", positive=True)
        self._slot = slot(NODES_KEY)
        self._held = False
        self._renew_at = -math.inf
        self._lock = threading.Lock()

    def mint(self) -> str:
        if time.monotonic() >= self._renew_at:
            self._keep()
        return self.minter.mint("JOB")

    def _keep(self) -> None:
        with self._lock:
            now = time.monotonic()
            if now < self._renew_at:
                return  # another thread renewed it meanwhile
            if self._held and self.minter.is_ready:
                try:
                    if self._renew():
                        return
                except EchoMQError as exc:
                    # Go on minting until the lease's safe end; try again in a second.
                    log.warning("id node lease renewal failed (%s); retrying in 1 s", exc)
                    self._renew_at = now + 1.0
                    return
                log.warning("id node %d was taken over; leasing another", self.minter.node)
            self._acquire()

    def _ceiling(self) -> int:
        return max(self.minter.now_ts(), self.minter.last_ts()) + self._ttl_ms + HEADROOM_MS

    def _call(self, op: str, node: int, ceiling: int) -> Any:
        args = (op, self.owner, node, self._ttl_ms, ceiling, secrets.randbelow(1024))
        command = self._script.command((NODES_KEY,), args)
        reply = error_of(self.router.call(self._slot, pack(command), self._script))
        if isinstance(reply, ServerError):
            raise reply
        return reply

    def _acquire(self) -> None:
        preferred = self.minter.node if self._held else -1
        sent, ceiling = time.monotonic(), self._ceiling()
        try:
            node, floor = self._call("lease", preferred, ceiling)
        except Refusal as exc:
            if exc.code == "EMQNODES":
                raise NodeLeaseError(
                    "all 1024 id nodes of this deployment are leased by live minters"
                ) from None
            raise
        self.minter.grant(int(node), int(floor), ceiling, sent + LEASE_TTL - SAFETY)
        self._held = True
        self._renew_at = sent + LEASE_TTL / 3
        if int(floor) + self._ttl_ms > ceiling:
            self._renew()  # the last holder's clock ran ahead: ask for a ceiling above its own

    def _renew(self) -> bool:
        sent, ceiling = time.monotonic(), self._ceiling()
        if not self._call("renew", self.minter.node, ceiling):
            self.minter.lapse()
            return False
        self.minter.grant(self.minter.node, 0, ceiling, sent + LEASE_TTL - SAFETY)
        self._renew_at = sent + LEASE_TTL / 3
        return True

    def release(self) -> None:
        with self._lock:
            if not self._held:
                return
            self.minter.lapse()
            self._held = False
            with contextlib.suppress(EchoMQError):  # unreachable: the lease ends by itself
                self._call("release", self.minter.node, max(self.minter.last_ts(), 0))


class SyncProcess:
    """What one process holds for a queue: its router (and every thread's sockets) and its
    id node lease. A forked child builds its own; the parent's is never used there."""

    def __init__(self, seeds: Sequence[ConnectionOptions], scripts: ScriptRegistry) -> None:
        self.pid = os.getpid()
        self.router = Router(seeds, WIRE_VERSION)
        self.lease = SyncLease(self.router, scripts)
        self.mint = self.lease.mint

"""One :meth:`SyncQueue.wait`, blocking: :class:`SyncWaiter`, a subscription of its own to the
shard's ``done`` channel that reads the job's row after the server confirmed it and again on
each message for the job, through reconnects, failovers and moved slots; the blocking twin of
``waiters.py``'s hub (one wait per subscription here, no event loop to share one on).
"""

from __future__ import annotations

import time

from echomq.engine.checks import text
from echomq.engine.keys import DONE_WILDCARD
from echomq.engine.producer import job_info
from echomq.engine.results import FINISHED, JobInfo
from echomq.errors import ServerError, WireError, WireTimeout
from echomq.wire.blocking import NOTHING, Link, Push, Router, error_of, pack
from echomq.wire.codec import Codec


class SyncWaiter:
    """One :meth:`SyncQueue.wait`: a subscription of its own on the node owning the queue.

    The subscription is kept however long nothing is said on it: after a call timeout of
    silence it is asked a ``PING``, and only a link silent for another one counts as lost (a
    server gone without a word); then it subscribes again and reads the row again. Reconnects
    that fail are retried (on a cluster, through the next seed, which names the slot's new
    owner) for a call timeout counted from the first failure since the last subscription the
    server confirmed, as a call is: a wait without a limit lives through any failover a call
    lives through, however many reconnects it made before.
    """

    def __init__(
        self,
        router: Router,
        slot: int,
        done: str,
        row_key: str,
        job_id: str,
        codec: Codec,
        deadline: float | None,
    ) -> None:
        self.router = router
        self.slot = slot  # the queue's (its shard's) slot, whose owner says the channel
        self.done = done  # the shard channel each completion and burial is told on
        self.channel = done.encode()
        self.row_key = row_key
        self.job_id = job_id
        self.codec = codec
        self.deadline = deadline
        # The messages that make it read the row again: its job's id, and "*" (every waited
        # row: obliterate and large drains say so in one message instead of one per id).
        self.ids = (job_id, DONE_WILDCARD)
        self.failures = 0  # failed tries in a row since the last confirmed subscription
        self.failing_since: float | None = None  # when the first of them failed
        self._pings = 0  # PINGs sent on the current subscription, not answered yet

    def _left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def run(self) -> JobInfo | None:
        router = self.router
        address: str | None = None  # the slot's owner, unless a seed is to be asked instead
        while True:
            left = self._left()
            if self.failures and left is not None and left <= 0:
                return None  # the first pass reads the row whatever the timeout
            try:
                link = router.dedicated(self.slot, "wait", address)
            except WireError as exc:
                now = time.monotonic()
                self.failures += 1
                self.failing_since = self.failing_since or now
                if left is None and now - self.failing_since >= router.seed.call_timeout:
                    raise
                if router.is_cluster:  # the owner may be gone: a seed names the new one
                    address = router.next_seed(exc.address or router.address(self.slot))
                pause = min(0.1 * self.failures, 1.0)
                time.sleep(pause if left is None else max(min(pause, left), 0.0))
                continue
            address = None
            try:
                outcome = self._listen(link)
            except WireError:
                self.failures += 1  # lost mid-wait: subscribe again and read the row again
                continue
            finally:
                link.close()
            if outcome is not _AGAIN:
                return outcome  # type: ignore[return-value]

    def _listen(self, link: Link) -> JobInfo | object | None:
        """Subscribe, read the row, then read it again on each message for the job (its id, or
        ``*``: every waited row), until it finished (its row), it is gone (None), the time is up
        (None) or the slot moved."""
        self._pings = 0
        link.send(pack(("SSUBSCRIBE", self.done)) + pack(("HGETALL", self.row_key)))
        outcome = self._row(link)
        quiet = link.options.call_timeout
        heard = time.monotonic()
        while outcome is _PENDING:
            left = self._left()
            if left is not None and left <= 0:
                return None
            silent = time.monotonic() - heard
            if silent >= quiet:
                if self._pings:
                    raise WireTimeout(f"no PONG within {quiet}s", address=link.address)
                link.send(_PING)
                self._pings += 1
                heard = time.monotonic()
                continue
            frame = link.read(quiet - silent if left is None else min(left, quiet - silent))
            if frame is NOTHING:
                continue
            heard = time.monotonic()
            if type(frame) is not Push:
                self._pings = max(self._pings - 1, 0)  # a PONG: no other reply is asked for
                continue
            kind = frame[0]
            if kind == b"smessage" and frame[1] == self.channel and text(frame[2]) in self.ids:
                link.send(pack(("HGETALL", self.row_key)))
                outcome = self._row(link)
            elif kind == b"sunsubscribe":
                return _AGAIN  # the slot moved: subscribe where it went
        return outcome

    def _row(self, link: Link) -> JobInfo | object | None:
        """The reply to the row's HGETALL (push frames and PONGs before it skipped, a confirmed
        subscription and a moved slot noted): the finished row, None for no row,
        :data:`_PENDING`, or :data:`_AGAIN` to follow."""
        moved = False
        while True:
            frame = link.read(link.options.call_timeout)
            if frame is NOTHING:
                raise WireError("no reply to the subscription", address=link.address)
            if type(frame) is Push:
                if frame[0] == b"ssubscribe":
                    self.failures, self.failing_since = 0, None  # held there: a fresh start
                moved = moved or frame[0] == b"sunsubscribe"
                continue
            if self._pings > 0:  # a PONG asked for before the row
                self._pings -= 1
                continue
            break
        row = error_of(frame)
        if isinstance(row, ServerError):
            if row.code not in ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"):
                raise row
            self._follow(row)
            return _AGAIN
        info = job_info(self.job_id, row, self.codec)
        if info is None:
            return None
        if info.state in FINISHED:
            return info
        return _AGAIN if moved else _PENDING

    def _follow(self, error: ServerError) -> None:
        router = self.router
        parts = error.message.split()
        if error.code == "MOVED" and len(parts) == 3:
            router.owners[int(parts[1])] = parts[2]
            router.is_cluster = True
        else:
            time.sleep(0.05)  # a migration or a failover under way: ask again in a moment


_PENDING = object()
_AGAIN = object()
_PING = pack(("PING",))

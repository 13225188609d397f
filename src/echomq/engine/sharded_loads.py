"""What each shard of a sharded queue holds for a worker's stride: the loads (its most urgent
band with a ringed lane and that ring's weights) and when its first benched lane returns, heard
from each claim's reply and read every refresh; a shard whose primary is down, or stopped
answering, counts idle, so the others are served meanwhile (a mixin of
:class:`~echomq.engine.sharded.ShardedQueue`, docs/concepts/shards.md)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from echomq.engine.keys import slot
from echomq.engine.queue import Queue
from echomq.engine.shard_schedule import IDLE, ShardLoad, ShardStride, shard_load
from echomq.engine.transitions import Claimed
from echomq.errors import ConnectError
from echomq.wire.connector import Arg
from echomq.wire.pool import Wire

#: Seconds a read of the loads waits for a shard's answer before counting it idle (a shard
#: whose primary is down answers only once a replica took over).
LOAD_WAIT: Final = 0.5


class LoadsAcrossShards:
    """The shards' loads as one worker's stride hears them."""

    shards: tuple[Queue, ...]
    wire: Wire
    _stride: ShardStride
    _loads_at: float
    _now_ms: int
    _dues: list[int | None]
    _reading: asyncio.Future[list[ShardLoad]] | None
    _shard_reads: dict[int, asyncio.Future[None]]
    _grown = False  # a load read installed a directory with more shards
    #: The server's clock (ms) and this loop's time when it was read; the read in flight. A
    #: read of the loads waits for none but the first: the one TIME may have gone to a
    #: primary that stopped answering, and the clock is carried forward by this one's.
    _clock: tuple[int, float] | None = None
    _clock_read: asyncio.Future[Any] | None = None

    def _check_reachable(self, k: int) -> None:
        """Raise :class:`ConnectError` when shard ``k``'s primary is known down (on a cluster
        router, its connector lost its socket and is reconnecting): a call there would wait
        out a failover, up to the call timeout, and hold up every other shard's claims."""
        nodes, owner = getattr(self.wire, "nodes", None), getattr(self.wire, "owner", None)
        if not isinstance(nodes, dict) or owner is None:
            return  # one server: no shard is down alone
        address = owner(slot(self.shards[k].keys.root)).address
        node = nodes.get(address)
        if node is not None and node.established and not node.is_connected:
            raise ConnectError(f"shard {k}'s primary is down (reconnecting)", address=address)

    async def read_loads(self) -> list[ShardLoad]:
        """Read every shard's load (its most urgent band with a ringed lane and the weights on
        that band's ring) and when its first benched lane returns, one pipelined read per
        shard, and tell the stride. A shard that failed, or has not answered within
        ``LOAD_WAIT`` (its primary down: the router waits out a failover), counts idle until
        its read, left running, answers: the other shards are served meanwhile. Raises when
        no shard answered and some failed."""
        loop = asyncio.get_running_loop()
        started: list[asyncio.Future[Any]] = []
        if self._clock_read is None:  # TIME is keyless: on a cluster, any primary answers it
            self._clock_read = clock = asyncio.ensure_future(self.wire.call("TIME"))
            clock.add_done_callback(self._clock_answered)
            if self._clock is None:  # the first read waits for it; later ones go on without
                started.append(clock)
        for k in range(len(self.shards)):
            if k in self._shard_reads and self._shard_reads[k].done():
                del self._shard_reads[k]  # failed since the last refresh: read again
            if k not in self._shard_reads:
                started.append(asyncio.ensure_future(self._read_shard(k)))
                started[-1].add_done_callback(_retrieved)
                self._shard_reads[k] = started[-1]
        if started:
            await asyncio.wait(started, timeout=LOAD_WAIT)
        self._loads_at = loop.time()
        if self._clock is not None:  # the server's clock, as this one moved since it was read
            server_ms, read_at = self._clock
            now_ms = server_ms + int((self._loads_at - read_at) * 1000)
            self._now_ms = max(self._now_ms, now_ms)
        failed: list[BaseException] = []
        for k, read in list(self._shard_reads.items()):
            self._stride.observe(k, IDLE)  # until it answers
            self._dues[k] = None
            if read.done():  # it failed (read again at the next refresh)
                del self._shard_reads[k]
                error = None if read.cancelled() else read.exception()
                failed += [error] if error is not None else []
        if failed and len(self._shard_reads) + len(failed) == len(self.shards):
            raise failed[0]  # no shard answered
        if self._grown:  # the directory named new shards: read theirs too
            self._grown = False
            return await self.read_loads()
        return [self._stride.load(k) for k in range(len(self.shards))]

    def _clock_answered(self, read: asyncio.Future[Any]) -> None:
        """Keep the server's clock a TIME answered (a failed one is asked again)."""
        self._clock_read = None
        if not read.cancelled() and read.exception() is None:
            now = read.result()
            server_ms = int(now[0]) * 1000 + int(now[1]) // 1000
            self._clock = server_ms, asyncio.get_running_loop().time()

    async def _read_shard(self, k: int) -> None:
        """Read shard ``k``'s load and first due and tell the stride, when it answers; shard
        0's read carries the directory's epoch too, so a grow or a move by another process is
        heard at the next refresh (:meth:`_placement_moved_on`)."""
        shard = self.shards[k]
        reads: list[tuple[Arg, ...]] = [
            ("HGETALL", shard.keys.ringweight),
            ("HGET", shard.keys.meta, "dweight"),
            ("ZRANGE", shard.keys.rdue, 0, 0, "WITHSCORES"),
        ]
        if k == 0:
            reads.append(("HGET", shard.keys.directory, "epoch"))
        counters, dweight, due, *epoch = await shard.wire.call_many(reads)
        del self._shard_reads[k]
        self._dues[k] = _first_score(due)
        self._stride.observe(k, shard_load(counters, dweight))
        if epoch and await self._placement_moved_on(epoch[0]):
            self._grown = True

    if TYPE_CHECKING:  # ShardedQueue's (declared only: a definition here would hide it)

        async def _placement_moved_on(self, epoch: Any) -> bool:
            """Install the directory when its epoch is past this queue's; True: shards added."""

    def _heard(self, k: int, claimed: Claimed, lease_ms: int) -> None:
        """Tell the stride shard ``k``'s load as its claim's reply left it (no lane on a ring:
        idle, whatever the counters say), and keep when its first benched lane returns; the
        server's clock is the claim's (its deadline less the lease)."""
        assert claimed.load is not None  # asked for by Queue._leased(load=True)
        band, weight, due = claimed.load
        self._stride.observe(k, ShardLoad(band, weight) if claimed.more and weight else IDLE)
        self._dues[k] = due if due >= 0 else None
        self._now_ms = max(self._now_ms, claimed.deadline_ms - lease_ms)

    async def _loads_now(self) -> None:
        """:meth:`read_loads`, one read in flight at a time: the claims that find the refresh
        due together share it, rather than each reading every shard."""
        reading = self._reading
        if reading is None:
            reading = self._reading = asyncio.ensure_future(self.read_loads())
            reading.add_done_callback(self._read_done)
        await asyncio.shield(reading)

    def _read_done(self, reading: asyncio.Future[list[ShardLoad]]) -> None:
        if self._reading is reading:
            self._reading = None
        if not reading.cancelled():
            reading.exception()  # retrieved: the claims awaiting it raise it

    def _due_now(self) -> list[int]:
        """The shards whose first benched lane was due at the last read."""
        return [k for k, due in enumerate(self._dues) if due is not None and due <= self._now_ms]

    def _due_later(self, visited: set[int]) -> list[float]:
        """Seconds until the first benched lane of each shard not visited returns."""
        return [
            (due - self._now_ms) / 1000
            for k, due in enumerate(self._dues)
            if due is not None and due > self._now_ms and k not in visited
        ]


def _retrieved(read: asyncio.Future[None]) -> None:
    """A shard's load read that failed with nobody waiting: retrieved, so nothing is logged
    (the next refresh reads the shard again)."""
    if not read.cancelled():
        read.exception()


def _first_score(reply: Any) -> int | None:
    """The score of a ``ZRANGE … 0 0 WITHSCORES`` reply (RESP3: ``[[member, score]]``)."""
    if not reply:
        return None
    first = reply[0]
    return int(float(first[1] if isinstance(first, list) else reply[1]))

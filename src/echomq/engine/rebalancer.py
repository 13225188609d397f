"""A sharded queue's queue-wide gates: its budgets (the directory's ``concurrency`` and
``rate``) split into per-shard quotas, and the rebalancer that moves them toward the shards
whose lanes wait (docs/concepts/shards.md, "Queue-wide gates across shards").

One holder at a time (the lease ``emq:{q}:rebalancer`` on shard 0, its fencing token checked by
every quota script) runs a round every :data:`PERIOD`: it fences and reads every shard (one
round trip), computes the targets (:func:`echomq.engine.quotas.water_fill`), lowers the donors
by at most their unused room (quota.lua ``give``), then raises the receivers by what was freed
plus any budget no shard holds (``take``). So the quotas never sum past the budget, and on every
shard what is used never passes its quota: the gates hold exactly, whatever the round does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from echomq.engine.keys import Keyspace
from echomq.engine.queue import Queue
from echomq.engine.quotas import ShardDemand, water_fill
from echomq.engine.shard_schedule import ShardLoad, shard_load
from echomq.errors import EchoMQError

log = logging.getLogger(__name__)

#: Seconds between two rounds of the rebalancer.
PERIOD: Final = 0.25
#: How long (ms) a holder's lease lasts past its last round: another worker takes over then.
LEASE_MS: Final = 2000
#: The gates a sharded queue splits, as quota.lua names them.
GATES: Final = ("concurrency", "rate")


@dataclass(frozen=True, slots=True)
class Budgets:
    """A sharded queue's queue-wide budgets, as its directory holds them: ``concurrency`` (jobs
    leased at once) and ``rate`` (``max``, ``window`` ms, ``mode``: "smooth" or "" for fixed)."""

    concurrency: int | None = None
    rate: tuple[int, int, str] | None = None
    #: The directory's shard count and epoch (0: not read), so a round acts on every shard.
    count: int = 0
    epoch: int = 0

    def of(self, gate: str) -> int | None:
        if gate == "concurrency":
            return self.concurrency
        return None if self.rate is None else self.rate[0]

    @property
    def is_set(self) -> bool:
        return self.concurrency is not None or self.rate is not None

    @classmethod
    def parse(cls, concurrency: Any, rate: Any, count: Any = None, epoch: Any = None) -> Budgets:
        """From the directory's ``concurrency``, ``rate`` (``max:window_ms[:smooth]``),
        ``count`` and ``epoch``."""
        parsed: tuple[int, int, str] | None = None
        if rate is not None:
            most, window, *mode = _text(rate).split(":")
            parsed = (int(most), int(window), mode[0] if mode else "")
        return cls(
            None if concurrency is None else int(concurrency),
            parsed,
            0 if count is None else int(count),
            0 if epoch is None else int(epoch),
        )


@dataclass(frozen=True, slots=True)
class ShardQuota:
    """What a round read of one shard: each gate's quota (-1: not set there) and use (leases
    now; claims in the rate's window), and its load."""

    quotas: dict[str, int]
    used: dict[str, int]
    load: ShardLoad


class Rebalancer:
    """The quota rebalancer of one sharded queue (its ``shards``, shard 0 first).
    ``catch_up`` (given the directory's epoch) installs a grown map in the owning queue, which
    extends :attr:`shards`: a round or a split acts on every shard the directory names, never
    on the ones this process knew alone (their quotas would top up past the budget)."""

    def __init__(
        self,
        shards: Sequence[Queue],
        directory: Keyspace,
        catch_up: Callable[[Any], Awaitable[object]] | None = None,
    ) -> None:
        self.shards = tuple(shards)
        self.keys = directory
        self._catch_up = catch_up
        #: This process's name on the lease.
        self.owner = uuid.uuid4().hex
        self.rounds = 0  # rounds run while holding the lease
        self._carry: dict[str, list[Fraction]] = {}
        self._task: asyncio.Task[None] | None = None
        # One move at a time in this process: a setter and a round hold the same owner's token,
        # so the lease does not keep them apart, and two moves computed from two reads would
        # each hand out the budget no shard holds.
        self._moving = asyncio.Lock()

    # -- the budgets ----------------------------------------------------------------------------

    async def budgets(self) -> Budgets:
        fields = await self.shards[0].wire.call(
            "HMGET", self.keys.directory, "concurrency", "rate", "count", "epoch"
        )
        return Budgets.parse(*fields)

    async def _whole(self, budgets: Budgets) -> bool:
        """Whether :attr:`shards` are every shard the directory names, after asking the queue
        to catch up with a grow it has not heard of yet."""
        if budgets.count > len(self.shards) and self._catch_up is not None:
            await self._catch_up(budgets.epoch)
        return budgets.count <= len(self.shards)

    async def set_budget(self, gate: str, value: str | None) -> bool:
        """Write one budget (``value`` as the directory holds it, None: removed) and split it
        at once: the shards' quotas set (or cleared) under a lease taken over from any holder,
        then one round. False: the directory held that value already (nothing written)."""
        field = "concurrency" if gate == "concurrency" else "rate"
        wire = self.shards[0].wire
        before = await wire.call("HGET", self.keys.directory, field)
        if (None if before is None else _text(before)) == value:
            return False
        if value is None:
            await wire.call("HDEL", self.keys.directory, field)
        else:
            await wire.call("HSET", self.keys.directory, field, value)
        async with self._moving:
            return await self._split(gate, value, before)

    async def _split(self, gate: str, value: str | None, before: Any) -> bool:
        token = int(await self.shards[0].engine.quota("hold", self.owner, LEASE_MS, "1"))
        try:
            budgets = await self.budgets()
            if not await self._whole(budgets):
                raise EchoMQError(
                    f"{self.keys.queue} has {budgets.count} shards, this process knows "
                    f"{len(self.shards)}: the budget is split by the next round"
                )
            reads = await self._read(token)
            window = (budgets.rate[1], budgets.rate[2]) if budgets.rate else (0, "")
            starts = value is None or (gate == "rate" and _shape(before) != _shape(value))
            if starts or any(r.quotas[gate] < 0 for r in reads):
                # Cleared, a new gate or a new window: every shard starts at 0 (or none), and
                # the round below hands the budget out.
                quota = "" if value is None else "0"
                await asyncio.gather(
                    *(
                        shard.engine.quota("set", token, gate, quota, window[0] or 1, window[1])
                        for shard in self.shards
                    )
                )
                self._carry.pop(gate, None)
                reads = await self._read(token)
            await self._move(token, budgets, reads)
        finally:
            await self.shards[0].engine.quota("release", self.owner)
        return True

    # -- rounds ---------------------------------------------------------------------------------

    async def round(self) -> bool:
        """One round when a budget is set and this process holds (or takes) the lease; False
        when it did not run."""
        budgets = await self.budgets()
        if not budgets.is_set:
            return False
        async with self._moving:
            token = int(await self.shards[0].engine.quota("hold", self.owner, LEASE_MS, ""))
            if not token:
                return False
            # Read again once the shards are fenced: a setter that took the lease before this
            # hold wrote its budget before its own, so this round moves toward the new one.
            # A grow this process has not heard of is taken on first (or the round skipped):
            # the budget's room is what every shard the directory names leaves.
            budgets = await self.budgets()
            if not await self._whole(budgets):
                return False
            reads = await self._read(token)
            # A budget whose split stopped midway (a shard down), or set by a process that did
            # not know every shard, leaves a shard unlimited (-1): it starts at 0 and this round
            # hands it its share, so no shard stays unlimited under a budget.
            unset = [
                (k, gate)
                for gate in GATES
                if budgets.of(gate) is not None
                for k, r in enumerate(reads)
                if r.quotas[gate] < 0
            ]
            if unset:
                window = (budgets.rate[1], budgets.rate[2]) if budgets.rate else (0, "")
                await asyncio.gather(
                    *(
                        self.shards[k].engine.quota(
                            "set", token, gate, "0", window[0] or 1, window[1]
                        )
                        for k, gate in unset
                    )
                )
                reads = await self._read(token)
            await self._move(token, budgets, reads)
        self.rounds += 1
        return True

    async def _read(self, token: int) -> list[ShardQuota]:
        """Fence every shard with ``token`` and read its quotas, use and load (one round trip)."""
        replies = await asyncio.gather(
            *(shard.engine.quota("read", token) for shard in self.shards)
        )
        return [
            ShardQuota(
                {"concurrency": int(c), "rate": int(r)},
                {"concurrency": int(active), "rate": int(claims)},
                shard_load(counters, dweight),
            )
            for c, active, r, claims, counters, dweight in replies
        ]

    async def _move(self, token: int, budgets: Budgets, reads: list[ShardQuota]) -> None:
        """Lower the donors toward their targets (at most their room), then raise the
        receivers by what the budget leaves, gate by gate (two round trips)."""
        gives: list[tuple[int, str, int]] = []
        wanted: dict[str, list[int]] = {}
        for gate in GATES:
            budget = budgets.of(gate)
            if budget is None or any(r.quotas[gate] < 0 for r in reads):
                continue
            # A shard with a lane on its ring would use more: the ring holds only lanes that can
            # be served now (not at their ceiling, not benched by their rate), so what keeps it
            # under its quota is the workers' visits, not its demand. Capping it at its use
            # until it met its quota would starve a shard whose lanes just arrived for a round.
            demands = [
                ShardDemand(r.load.band, r.load.weight, r.used[gate], r.load.weight > 0)
                for r in reads
            ]
            carry = self._carry.get(gate, [])
            carry = carry + [Fraction(0)] * (len(demands) - len(carry)) if carry else carry
            targets, self._carry[gate] = water_fill(demands, budget, carry)
            wanted[gate] = targets
            gives += [
                (k, gate, r.quotas[gate] - t)
                for k, (r, t) in enumerate(zip(reads, targets, strict=True))
                if r.quotas[gate] > t
            ]
        quotas = {gate: [r.quotas[gate] for r in reads] for gate in wanted}
        replies = await asyncio.gather(
            *(self.shards[k].engine.quota("give", token, gate, n) for k, gate, n in gives)
        )
        for (k, gate, _), (_, quota) in zip(gives, replies, strict=True):
            quotas[gate][k] = int(quota)
        takes: list[tuple[int, str, int]] = []
        for gate, targets in wanted.items():
            budget = budgets.of(gate)
            assert budget is not None
            left = budget - sum(quotas[gate])
            short = sorted(
                (k for k in range(len(targets)) if targets[k] > quotas[gate][k]),
                key=lambda k: quotas[gate][k] - targets[k],
            )
            for k in short:
                if left <= 0:
                    break
                n = min(left, targets[k] - quotas[gate][k])
                takes.append((k, gate, n))
                left -= n
        await asyncio.gather(
            *(self.shards[k].engine.quota("take", token, gate, n) for k, gate, n in takes)
        )

    # -- the worker's side ----------------------------------------------------------------------

    def start(self) -> None:
        """Run rounds every :data:`PERIOD` in the background (the queue's upkeep starts it)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop the rounds and end this process's lease, if it holds it."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(EchoMQError):
            await self.shards[0].engine.quota("release", self.owner)

    async def _run(self) -> None:
        while True:
            try:
                await self.round()
            except EchoMQError as exc:  # a stale token (another holder), a lost connection
                log.info("quota round of %s: %s", self.keys.queue, exc)
            except Exception:  # a bug must not stop the rounds of every later period
                log.exception("quota round of %s failed", self.keys.queue)
            await asyncio.sleep(PERIOD)


def _shape(rate: Any) -> tuple[str, ...]:
    """A rate's window and mode (what a change of only ``max`` keeps)."""
    return () if rate is None else tuple(_text(rate).split(":")[1:])


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

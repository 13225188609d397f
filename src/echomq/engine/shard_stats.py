"""What an operator reads per shard of a sharded queue: where it lives, what it holds, the
active weight its ring brings to the stride, the claims it serves, and its part of the
queue-wide gates (its quotas) (``ShardedQueue
.shard_stats``, shown by ``echomq stats``, the dashboard and ``/metrics``;
docs/concepts/shards.md, "One logical queue")."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from echomq.engine.checks import text
from echomq.engine.eta import measured_rate
from echomq.engine.keys import SLOTS, crc16
from echomq.engine.queue import Queue
from echomq.engine.reads import QueueRate, queue_rate
from echomq.engine.results import Counts
from echomq.engine.shard_schedule import shard_load


@dataclass(frozen=True, slots=True)
class ShardStats:
    """One shard as one read saw it (the shards are read at once, not at one instant).

    ``shard``: its index; ``tag``: its hash tag; ``primary``: the address of the server that
    holds it (its primary on a cluster). ``lanes``: lanes holding pending jobs; ``pending``,
    ``leased``, ``scheduled``, ``dead``: its jobs per state (the queue's counts are the sums).
    ``band`` and ``weight``: its most urgent band with a serviceable lane and that band's active
    weight W_s, what the workers' stride shares claims by (``band`` None and ``weight`` 0: no
    lane to serve). ``claims_per_second``: the claims it served lately, as the engine measures
    them for ETAs (5 s time constant; 0.0: none). ``paused``: the queue's pause, as this shard
    holds it.

    Its part of the queue-wide gates (docs/concepts/shards.md, "Queue-wide gates across
    shards"): ``concurrency_quota``, the jobs it may lease at once, and ``rate_quota``, the
    claims it may make per the budget's window (None: the queue has no such budget; 0: the
    shard holds none of it now, so its claims are refused as if paused: ``noquota``);
    ``rate_spent``, its claims in its current window, and ``rate_wait``, seconds until its
    window admits again (0.0: now, or no rate quota)."""

    shard: int
    tag: str
    primary: str
    paused: bool
    lanes: int
    pending: int
    leased: int
    scheduled: int
    dead: int
    band: int | None
    weight: int
    claims_per_second: float
    concurrency_quota: int | None = None
    rate_quota: int | None = None
    rate_spent: int = 0
    rate_wait: float = 0.0
    noquota: bool = False


def summed(each: Sequence[Counts]) -> Counts:
    """Counts of several shards as one queue's: every field summed."""
    return Counts(*(sum(getattr(c, f.name) for c in each) for f in fields(Counts)))


async def read_shard_stats(shards: Sequence[Queue]) -> list[ShardStats]:
    """Every shard of ``shards`` (a sharded queue's, in order) read at once: its counts (one
    script), its ring weights, pause, quotas and claim rate (one pipelined read) and its rate
    window (one more), beside the server's clock."""
    return (await read_shard_figures(shards))[0]


async def read_shard_figures(shards: Sequence[Queue]) -> tuple[list[ShardStats], Counts]:
    """:func:`read_shard_stats`, and the queue's counts summed from the same reads (what a
    snapshot shows beside them, not read a second time)."""
    wire = shards[0].wire
    clock, *each = await asyncio.gather(wire.call("TIME"), *(_read(shard) for shard in shards))
    now_ms = int(clock[0]) * 1000 + int(clock[1]) // 1000
    stats = []
    for shard, (counts, (counters, meta, rate, served), window) in zip(shards, each, strict=True):
        dweight, paused, concurrency, noquota = meta
        load = shard_load(counters, dweight)
        letters = "" if noquota is None else text(noquota)
        stats.append(
            ShardStats(
                shard=shard.shard,
                tag=shard.keys.tag,
                primary=_primary(shard),
                paused=bool(paused),
                lanes=counts.lanes,
                pending=counts.pending,
                leased=counts.active,
                scheduled=counts.scheduled,
                dead=counts.dead,
                band=load.band if load.is_active else None,
                weight=load.weight,
                claims_per_second=_claim_rate(rate, served, now_ms),
                concurrency_quota=_quota(concurrency, "c" in letters),
                rate_quota=0 if "r" in letters else _rate_quota(window),
                rate_spent=window.spent,
                rate_wait=window.wait,
                noquota=bool(letters),
            )
        )
    return stats, summed([counts for counts, _, _ in each])


async def _read(shard: Queue) -> tuple[Counts, list[Any], QueueRate]:
    keys = shard.keys
    reply: list[Any]
    counts, reply, window = await asyncio.gather(
        Queue.counts(shard),  # the shard's own: a sharded queue's shard 0 sums every shard
        shard.wire.call_many(
            [
                ("HGETALL", keys.ringweight),
                ("HMGET", keys.meta, "dweight", "paused", "concurrency", "noquota"),
                ("HGET", keys.rates, ""),
                ("HGET", keys.served, ""),
            ]
        ),
        queue_rate(shard.wire, keys),  # its rate quota is its queue-level rate (meta max)
    )
    return counts, reply, window


def _quota(value: Any, none_left: bool) -> int | None:
    """A gate's quota as quota.lua reads it: the meta field, 0 under its ``noquota`` letter,
    None when the gate is not set on the shard."""
    if value is not None:
        return int(value)
    return 0 if none_left else None


def _rate_quota(window: QueueRate) -> int | None:
    return None if window.rate is None else window.rate.max


def _claim_rate(rate: Any, served: Any, now_ms: int) -> float:
    """The shard's claims per second: its folded rate (``rate:at:since``) decayed to now plus
    the claims counted since its ``at``, as eta.lua's readers take the queue's."""
    raw = None if rate in (None, b"", "") else text(rate)
    last = int(float(raw.split(":")[1])) if raw is not None else now_ms
    return measured_rate(raw, int(served or 0), last, now_ms)


def _primary(shard: Queue) -> str:
    """Where the shard's keys live: its slot's primary on a cluster, else the server."""
    owner = getattr(shard.wire, "owner", None)
    if owner is None:
        return str(shard.wire.options.address)
    return str(owner(crc16(shard.keys.tag.encode()) % SLOTS).address)

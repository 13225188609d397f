"""Token buckets in the engine: a budget every worker on every host shares.

``take`` is atomic over all the named buckets (all debit or none), refills lazily from the
server clock, and answers how long to wait when refused. Buckets start full; idle ones expire.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from echomq.engine.checks import MAX_DURATION, MAX_RATE, count
from echomq.engine.keys import bucket_key, validate_bucket, validate_queue
from echomq.engine.scripts import ScriptRegistry
from echomq.errors import InvalidArgument
from echomq.wire.connector import Arg
from echomq.wire.pool import Wire


@dataclass(frozen=True, slots=True)
class Bucket:
    """``rate`` tokens per second, holding at most ``burst``."""

    name: str
    rate: float
    burst: int

    def __post_init__(self) -> None:
        validate_bucket(self.name)
        if (
            isinstance(self.rate, bool)
            or not isinstance(self.rate, int | float)
            or not math.isfinite(self.rate)
            or self.rate <= 0
        ):
            raise InvalidArgument("rate", self.rate, "must be a number of tokens per second > 0")
        if self.rate > MAX_RATE:
            raise InvalidArgument("rate", self.rate, f"must be at most {MAX_RATE} per second")
        count(self.burst, "burst", maximum=MAX_RATE)
        if self.burst / self.rate > MAX_DURATION:
            raise InvalidArgument(
                "rate", self.rate, f"refills a burst of {self.burst} in over 10 years"
            )


@dataclass(frozen=True, slots=True)
class Taken:
    """Every bucket paid; the work may go ahead. ``at_ms``: the server clock when it did."""

    at_ms: int

    def __bool__(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class Wait:
    """Refused, nothing debited: the same take can succeed after ``wait`` seconds."""

    wait: float
    at_ms: int

    def __bool__(self) -> bool:
        return False


class Buckets:
    """Token buckets under one hash tag: all buckets of one ``take`` live on one slot."""

    def __init__(self, wire: Wire, tag: str, *, scripts: ScriptRegistry | None = None) -> None:
        self.wire = wire
        self.tag = validate_queue(tag)
        self.scripts = scripts or ScriptRegistry.from_package()
        self._script = self.scripts["take"]

    def key(self, name: str) -> str:
        return bucket_key(self.tag, name)

    async def take(self, buckets: Sequence[Bucket], cost: int = 1) -> Taken | Wait:
        """Take ``cost`` tokens from every bucket, or none. Refusal says how long to wait."""
        if not buckets:
            raise InvalidArgument("buckets", buckets, "name at least one bucket")
        count(cost, "cost", maximum=MAX_RATE)
        for bucket in buckets:
            if cost > bucket.burst:
                raise InvalidArgument("cost", cost, f"exceeds bucket {bucket.name}'s burst")
        args: list[Arg] = [cost]
        for bucket in buckets:
            args += [repr(float(bucket.rate)), bucket.burst]
        keys = [self.key(b.name) for b in buckets]
        wait, now = await self.scripts.run(self.wire, self._script, keys, args)
        return Taken(int(now)) if wait == 0 else Wait(int(wait) / 1000, int(now))

"""Telegram's send limits as token buckets on the sandbox's monotonic clock: per chat, global,
and per group chat, plus a forced 429 a test can arm for one chat."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from codemojex.telegram.sandbox.options import SandboxLimits


@dataclass(slots=True)
class Bucket:
    """``burst`` tokens at most, refilled at ``rate`` per second; a send takes one."""

    rate: float
    burst: int
    tokens: float
    stamp: float

    def refill(self, now: float) -> None:
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait(self) -> float:
        """Seconds until one token is there (0 when a send may go now); call after refill."""
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate


class Limiter:
    """Decides, for each send to a chat, whether it goes now or how long the bot must wait.

    A refused send takes no token from any bucket. ``force`` arms a 429 for a chat's next send;
    once answered, that chat stays refused until its ``retry_after`` has elapsed, as on Telegram.
    """

    def __init__(self, limits: SandboxLimits, clock: Callable[[], float]) -> None:
        self._limits = limits
        self._clock = clock
        self._global = self._bucket(limits.global_rate, limits.global_burst)
        self._chats: dict[int, Bucket] = {}
        self._groups: dict[int, Bucket] = {}
        self._armed: dict[int, int] = {}
        self._held_until: dict[int, float] = {}

    def _bucket(self, rate: float, burst: int) -> Bucket:
        return Bucket(rate=rate, burst=burst, tokens=float(burst), stamp=self._clock())

    def force(self, chat: int, retry_after: int) -> None:
        """The next send to ``chat`` answers 429 with ``retry_after`` seconds."""
        if retry_after < 1:
            raise ValueError("retry_after must be >= 1 second")
        self._armed[chat] = retry_after

    def verdict(self, chat: int) -> int | None:
        """None when a send to ``chat`` may go now (its tokens are taken), else the whole
        seconds (>= 1) to put in the 429's ``retry_after``."""
        now = self._clock()
        armed = self._armed.pop(chat, None)
        if armed is not None:
            self._held_until[chat] = now + armed
            return armed
        held = self._held_until.get(chat)
        if held is not None:
            if now < held:
                return max(1, math.ceil(held - now))
            del self._held_until[chat]
        if not self._limits.is_enforced:
            return None
        buckets = [self._global, self._chat_bucket(chat)]
        if chat < 0:
            buckets.append(self._group_bucket(chat))
        for bucket in buckets:
            bucket.refill(now)
        wait = max(bucket.wait() for bucket in buckets)
        if wait > 0:
            return max(1, math.ceil(wait))
        for bucket in buckets:
            bucket.tokens -= 1.0
        return None

    def _chat_bucket(self, chat: int) -> Bucket:
        bucket = self._chats.get(chat)
        if bucket is None:
            bucket = self._chats[chat] = self._bucket(
                self._limits.chat_rate, self._limits.chat_burst
            )
        return bucket

    def _group_bucket(self, chat: int) -> Bucket:
        bucket = self._groups.get(chat)
        if bucket is None:
            bucket = self._groups[chat] = self._bucket(
                self._limits.group_rate, self._limits.group_burst
            )
        return bucket

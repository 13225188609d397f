"""The notification worker's policy as values: the send budgets (token buckets), its options,
the backoff curve, its counters, and the error that stops it (a bad token)."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

from codemojex.domain import CodemojexError
from echomq import Bucket

DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class NotifyLimits:
    """The send budgets (tokens per second, burst), a little under Telegram's: about 30/s
    overall, about 1/s per chat with short bursts, and at most 20 per minute per group."""

    global_rate: float = 30.0
    global_burst: int = 30
    chat_rate: float = 1.0
    chat_burst: int = 3
    group_rate: float = 20 / 60
    group_burst: int = 20

    def buckets(self, chat: int) -> list[Bucket]:
        """The buckets one send to ``chat`` pays (groups, with negative ids, pay three)."""
        paid = [
            Bucket("global", self.global_rate, self.global_burst),
            Bucket(f"chat:{chat}", self.chat_rate, self.chat_burst),
        ]
        if chat < 0:
            paid.append(Bucket(f"group:{chat}", self.group_rate, self.group_burst))
        return paid

    def own_budget_spent(self, wait: float) -> bool:
        """Whether a refused take's ``wait`` (seconds) comes from the chat's or group's own
        bucket: a take waits for the slowest bucket, and the global bucket never asks more than
        one token's refill (ceil(1000 / global_rate) ms, the take script's rounding), so a
        longer wait is the chat's or group's."""
        return round(wait * 1000) > math.ceil(1000 / self.global_rate)


class RecentChats:
    """A bounded set of chat ids, the least recently added forgotten first: the chats the
    worker has paced (forgetting one costs one idempotent lane-rate write when it is back)."""

    def __init__(self, size: int = 4096) -> None:
        if size < 1:
            raise ValueError(f"size {size!r}: at least 1")
        self.size = size
        self._chats: OrderedDict[int, None] = OrderedDict()

    def add(self, chat: int) -> bool:
        """Remember ``chat``; True when it was not remembered already."""
        if chat in self._chats:
            self._chats.move_to_end(chat)
            return False
        self._chats[chat] = None
        if len(self._chats) > self.size:
            self._chats.popitem(last=False)
        return True

    def __contains__(self, chat: object) -> bool:
        return chat in self._chats

    def __len__(self) -> int:
        return len(self._chats)


@dataclass(frozen=True, slots=True)
class NotifyOptions:
    """How the worker sends. Durations are seconds.

    ``attempts``: transient failures before the dead letters (the consumer's ``max_attempts``).
    ``hold``: a refused take whose wait is this short is waited out in hand rather than put
    back (the global bucket's refill is one token per 33 ms: putting a job back and claiming it
    again costs more round trips than the wait). ``jitter``: the largest share of a backoff
    added at random (0.2: up to 20% more), so failures of one moment do not retry in step.
    ``keep_delivered``: how long delivered ids are remembered; a record only has to outlive a
    crash between the send and the complete (the 60 s lease, the reap, the retries after it),
    so a day is ample, and at 30 sends/s a day's records are ~2.6M keys where a week's were
    ~18M. ``bad_token_delay``: how long jobs in hand wait when the token turns out bad.
    """

    limits: NotifyLimits = field(default_factory=NotifyLimits)
    attempts: int = 6
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    jitter: float = 0.2
    hold: float = 0.1
    keep_delivered: float = DAY
    bad_token_delay: float = 5.0

    def backoff(self, failures: int, draw: float) -> float:
        """The wait after ``failures`` transient failures with these options (``draw``: 0..1)."""
        return backoff(
            failures, base=self.backoff_base, cap=self.backoff_cap, jitter=self.jitter, draw=draw
        )


@dataclass(frozen=True, slots=True)
class NotifyCounts:
    """What the worker did since it started (a snapshot; the flood report and metrics read it).

    ``delivered`` sent or edited; ``deferred`` put back by a budget (no attempt spent);
    ``retried`` transient failures put back for another attempt; ``dropped`` permanent
    failures and notifications for a blocked chat (completed, not sent); ``dead`` out of
    attempts or malformed (in the dead letters); ``too_many_requests`` 429s seen;
    ``duplicates`` already delivered, not sent again; ``blocked`` chats newly marked blocked.
    """

    delivered: int = 0
    deferred: int = 0
    retried: int = 0
    dropped: int = 0
    dead: int = 0
    too_many_requests: int = 0
    duplicates: int = 0
    blocked: int = 0


class BadTokenError(CodemojexError):
    """The Bot API refused the bot's token (401/404): nothing can be sent until it is fixed.

    The token itself is never part of the message.
    """

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(
            f"the Bot API refused the bot token ({detail}); the notification worker stopped, "
            "its notifications stay queued: set a valid token and start it again",
            reason="bad_token",
        )


def backoff(
    failures: int,
    *,
    base: float = 0.5,
    cap: float = 30.0,
    jitter: float = 0.0,
    draw: float = 0.0,
) -> float:
    """Seconds before the next attempt after ``failures`` transient failures (1 = the first):
    d = min(base·2^(failures−1), cap), plus d × ``jitter`` (the largest share added, e.g. 0.2)
    × ``draw`` (0..1, drawn by the caller)."""
    if failures < 1:
        raise ValueError(f"failures must be >= 1, got {failures}")
    delay = min(base * (1 << min(failures - 1, 62)), cap)
    return delay + delay * jitter * draw

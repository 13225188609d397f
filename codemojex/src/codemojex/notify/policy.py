"""The notification worker's policy as values: its options (the send budgets are
:class:`~codemojex.notify.rate.NotifyLimits`), the backoff curve, its counters, and the error
that stops it (a bad token)."""

from __future__ import annotations

from dataclasses import dataclass, field

from codemojex.domain import CodemojexError
from codemojex.notify.rate import NotifyLimits

DAY = 86_400.0


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
    ``duplicates`` already delivered, not sent again; ``blocked`` chats newly marked blocked;
    ``coalesced`` status updates a later send already showed (completed, no send);
    ``held`` group results kept for a private chat that refuses the bot (sent once it writes).
    """

    delivered: int = 0
    deferred: int = 0
    retried: int = 0
    dropped: int = 0
    dead: int = 0
    too_many_requests: int = 0
    duplicates: int = 0
    blocked: int = 0
    coalesced: int = 0
    held: int = 0


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

"""The handlers of the game's queues, each an async callable for an echomq ``Consumer``:
:class:`ScoreWorker` on ``cm``, :class:`SettleWorker` on ``cm-settle`` and
:class:`NotifyWorker` on ``cm.notify``; and the :class:`Pipeline` that composes them with the
services.
"""

from codemojex.workers.notify import NOTIFY_CONSUMER, NotificationConsumer, NotifyWorker
from codemojex.workers.notify_policy import (
    BadTokenError,
    NotifyCounts,
    NotifyLimits,
    NotifyOptions,
)
from codemojex.workers.pipeline import Pipeline, serving
from codemojex.workers.score import Scored, ScoreWorker, scored_text
from codemojex.workers.settle import (
    PRIZE_REASON,
    Settled,
    SettleOutcome,
    SettleWorker,
    closed_text,
)

__all__ = [
    "NOTIFY_CONSUMER",
    "PRIZE_REASON",
    "BadTokenError",
    "NotificationConsumer",
    "NotifyCounts",
    "NotifyLimits",
    "NotifyOptions",
    "NotifyWorker",
    "Pipeline",
    "ScoreWorker",
    "Scored",
    "SettleOutcome",
    "SettleWorker",
    "Settled",
    "closed_text",
    "scored_text",
    "serving",
]

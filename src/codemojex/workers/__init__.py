"""The handlers of the game's queues, each an async callable for an echomq ``Consumer``:
:class:`ScoreWorker` on ``cm`` and :class:`SettleWorker` on ``cm-settle``; and the
:class:`Pipeline` that composes them with the services.
"""

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
    "PRIZE_REASON",
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

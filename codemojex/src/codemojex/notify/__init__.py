"""The game's services: submitting guesses (charge, record, enqueue on the player's lane), the
re-enqueue sweep, asking for closes (a perfect score, the timer sweep), and the notifier.

They hold their collaborators (the store, the queues, a minter) as fields: nothing here is a
global, and each is composed once by the application.
"""

from codemojex.services.closing import CLOSE_DEDUP_TTL, Closer, CloseReason, close_dedup_key
from codemojex.services.guesses import Guesses, Receipt, Resweep, score_payload
from codemojex.services.notifier import Blocklist, Notification, Notifier, Skipped
from codemojex.services.queues import (
    COMMANDS_QUEUE,
    NOTIFY_QUEUE,
    SCORE_QUEUE,
    SETTLE_QUEUE,
    GameQueues,
)

__all__ = [
    "CLOSE_DEDUP_TTL",
    "COMMANDS_QUEUE",
    "NOTIFY_QUEUE",
    "SCORE_QUEUE",
    "SETTLE_QUEUE",
    "Blocklist",
    "CloseReason",
    "Closer",
    "GameQueues",
    "Guesses",
    "Notification",
    "Notifier",
    "Receipt",
    "Resweep",
    "Skipped",
    "close_dedup_key",
    "score_payload",
]

"""The game stage's producer API, the one way other stages reach it: submit a guess (charged,
recorded, queued as a ``score`` task on the player's lane of ``cm``), ask for a game's close (a
``settle`` task on its lane of ``cm-settle``), and the stage's two tasks, registered here and
nowhere else (:func:`register`)."""

from __future__ import annotations

from codemojex.game.close import CLOSE_DEDUP_TTL, Closer, CloseReason
from codemojex.game.submit import Guesses, Receipt, Resweep, score_payload
from codemojex.game.tasks import SCORER, SETTLER, GameTasks, register

__all__ = [
    "CLOSE_DEDUP_TTL",
    "SCORER",
    "SETTLER",
    "CloseReason",
    "Closer",
    "GameTasks",
    "Guesses",
    "Receipt",
    "Resweep",
    "register",
    "score_payload",
]

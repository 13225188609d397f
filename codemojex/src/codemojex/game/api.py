"""The game stage's producer API, the one way other stages reach it: submit a guess (charged,
recorded, queued on the player's lane of ``cm``), ask for a game's close (on its lane of
``cm-settle``), and the stage's two queues, built here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass

from codemojex.game.close import CLOSE_DEDUP_TTL, Closer, CloseReason
from codemojex.game.submit import Guesses, Receipt, Resweep, score_payload
from codemojex.keyspace import Keyspace
from echomq import Minter, Queue, Wire

__all__ = [
    "CLOSE_DEDUP_TTL",
    "CloseReason",
    "Closer",
    "GameQueues",
    "Guesses",
    "Receipt",
    "Resweep",
    "score_payload",
]


@dataclass(frozen=True, slots=True)
class GameQueues:
    """``cm`` (guesses to score, a lane per player) and ``cm-settle`` (closes, a lane per
    game) of one deployment, on one wire."""

    score: Queue
    settle: Queue

    @classmethod
    def on(cls, wire: Wire, keyspace: Keyspace, minter: Minter) -> GameQueues:
        """The two queues on ``wire``; ``minter`` mints the job ids they mint themselves."""
        return cls(
            score=Queue(keyspace.score_queue, wire, minter=minter),
            settle=Queue(keyspace.settle_queue, wire, minter=minter),
        )

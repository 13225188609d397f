"""The game stage's two tasks, as any echomq application writes them: ``score`` on ``cm`` (a
lane per player) and ``settle`` on ``cm-settle`` (a lane per game). A task's arguments are
ids only, never the guess or the secret; its body takes the worker that does the work from
the running worker's state (:data:`SCORER`, :data:`SETTLER`), so a producer process registers
the same tasks without building any worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from codemojex.game.close import CLOSE_DEDUP_TTL
from codemojex.game.score import Scored, ScoreWorker
from codemojex.game.settle import Settled, SettleWorker
from codemojex.keyspace import Keyspace
from echomq import App, Task, context

SCORER: Final = "codemojex.game.scorer"
"""The key of the :class:`ScoreWorker` in a score worker's state."""

SETTLER: Final = "codemojex.game.settler"
"""The key of the :class:`SettleWorker` in a settle worker's state."""


ScoreTask = Task[..., Scored]
"""The type of the ``score`` task: ``score(game, guess, player, message=None)``."""

SettleTask = Task[[str, str], Settled]
"""The type of the ``settle`` task: ``settle(game, reason)``."""


@dataclass(frozen=True, slots=True)
class GameTasks:
    """The stage's tasks on one app: enqueue through :class:`~codemojex.game.api.Guesses` and
    :class:`~codemojex.game.api.Closer`, which are the stage's producer API."""

    score: ScoreTask
    settle: SettleTask


def register(app: App, keyspace: Keyspace) -> GameTasks:
    """Register ``score`` and ``settle`` on ``app``, on the queues ``keyspace`` names."""

    @app.task("score", queue=keyspace.score_queue, lane="player")
    async def score(game: str, guess: str, player: str, message: int | None = None) -> Scored:
        """Score one charged guess (its job id is the one its charge recorded); ``message``:
        the guess's message in its group, which the group's answer replies to."""
        run = context()
        scorer: ScoreWorker = run.state[SCORER]
        return await scorer.score(run.job.id, run.attempt, message=message)

    # A close request's dedup key lives CLOSE_DEDUP_TTL at most (see codemojex.game.close).
    @app.task("settle", queue=keyspace.settle_queue, lane="game", dedup_ttl=CLOSE_DEDUP_TTL)
    async def settle(game: str, reason: str = "timer") -> Settled:
        """Close ``game`` once, pay its pool and tell its room."""
        run = context()
        settler: SettleWorker = run.state[SETTLER]
        return await settler.settle(game, run.job.id)

    return GameTasks(score, settle)

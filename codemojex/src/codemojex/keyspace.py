"""The game's four queues on one bus — ``cm`` (guesses to score, a lane per player),
``cm-settle`` (closes, a lane per game), ``cm.notify`` (messages, a lane per chat) and
``cm.bot.commands`` (Telegram updates, a lane per chat) — opened together on one shared wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from echomq import Minter, Queue, Wire

SCORE_QUEUE: Final = "cm"
"""Charged guesses waiting to be scored; one lane per player (``PLR`` id)."""

SETTLE_QUEUE: Final = "cm-settle"
"""Closes waiting to be settled; one lane per game (``GAM`` id)."""

NOTIFY_QUEUE: Final = "cm.notify"
"""Messages waiting to be sent; one lane per chat (the Telegram chat id)."""

COMMANDS_QUEUE: Final = "cm.bot.commands"
"""Telegram updates waiting to be handled; one lane per chat (the Telegram chat id)."""


@dataclass(frozen=True, slots=True)
class GameQueues:
    """The ``score``, ``settle``, ``notify`` and ``commands`` queues of one deployment, sharing
    a wire."""

    score: Queue
    settle: Queue
    notify: Queue
    commands: Queue

    @classmethod
    def on(cls, wire: Wire, *, minter: Minter, prefix: str = "") -> GameQueues:
        """The four queues on ``wire``; ``prefix`` keeps apart deployments on one server (tests).

        One ``minter`` (leased from the engine, see ``Pipeline.build``) mints every job id the
        queues mint themselves.
        """
        return cls(
            score=Queue(prefix + SCORE_QUEUE, wire, minter=minter),
            settle=Queue(prefix + SETTLE_QUEUE, wire, minter=minter),
            notify=Queue(prefix + NOTIFY_QUEUE, wire, minter=minter),
            commands=Queue(prefix + COMMANDS_QUEUE, wire, minter=minter),
        )

    @property
    def wire(self) -> Wire:
        """The wire the queues share (also the board's)."""
        return self.score.wire

"""Everything one sandbox knows, in one object: its world, the updates waiting for the bot, the
limiter, the counters, the webhook, blocked users, open callback queries and injected faults."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from codemojex.telegram.sandbox.feed import Feed
from codemojex.telegram.sandbox.limiter import Limiter
from codemojex.telegram.sandbox.options import Faults, SandboxOptions
from codemojex.telegram.sandbox.stats import Tally
from codemojex.telegram.sandbox.updates import UpdateLog, Wake
from codemojex.telegram.sandbox.world import World


@dataclass(slots=True)
class Webhook:
    """The webhook the bot set (``url`` empty: none); ``secret`` is never shown anywhere."""

    url: str = ""
    secret: str | None = None
    last_error_date: int | None = None
    last_error_message: str | None = None


@dataclass(slots=True)
class CallbackQuery:
    """A tap the bot has yet to answer (or answered: ``is_answered``)."""

    user: int
    chat: int
    message_id: int
    is_answered: bool = False


class State:
    """The sandbox's whole state; the Bot API, the control API and the webhook share it."""

    def __init__(self, options: SandboxOptions) -> None:
        self.options = options
        self.clock = time.monotonic
        self.feed = Feed()
        self.tally = Tally()
        self.bot: dict[str, Any] = {
            "id": options.bot_id,
            "is_bot": True,
            "first_name": "Codemojex",
            "username": "codemojex_sandbox_bot",
        }
        self.world = World(self.bot, self._on_message)
        self.updates = UpdateLog(options.first_update_id)
        self.limiter = Limiter(options.limits, self.clock)
        self.webhook = Webhook()
        self.blocked: set[int] = set()
        self.callbacks: dict[str, CallbackQuery] = {}
        self.commands: list[dict[str, Any]] = []
        self.faults = options.faults
        self.dice = random.Random(options.faults.seed)
        self.poll_generation = 0
        #: Notified each time a getUpdates call arrives (tests wait on it, not on a sleep).
        self.polled = Wake()
        self.is_closing = False

    def set_faults(self, faults: Faults) -> None:
        self.faults = faults
        self.dice = random.Random(faults.seed)

    def draw_fault(self) -> str | None:
        """None (no fault), ``"json"`` (a JSON 500) or ``"html"`` (an HTML 502 page)."""
        if self.faults.error_rate <= 0 or self.dice.random() >= self.faults.error_rate:
            return None
        return "html" if self.dice.random() < self.faults.html_share else "json"

    def _on_message(self, kind: str, message: dict[str, Any]) -> None:
        self.feed.publish(kind, message)

    def publish_stats(self) -> None:
        if self.feed.is_watched:  # a snapshot per send is wasted when no page is open
            self.feed.publish("stats", self.tally.snapshot().to_json())


STATE = web.AppKey("state", State)
"""Where the aiohttp application keeps its sandbox's state."""

"""codemojex's keyspace: every queue name and every Valkey key of the game's own, in one place.

Each stage owns a family of keys, all under the hash tag of that stage's queue or game, so a
family shares one cluster slot with what it guards:

=========  ===========================================  ==============================
stage      key                                          what it holds
=========  ===========================================  ==============================
bot        ``cm:{<commands queue>}:draft:<chat>:<user>``  a guess composed on the keyboard
bot        ``cm:{<commands queue>}:seen:<update_id>``     the job that handled an update
game       ``<prefix>cm:{<GAM id>}:board``                a game's best totals (sorted set)
game       ``<prefix>cm:{<GAM id>}:closed``               a game's close lock
notify     ``cmn:{<notify queue>}:blocked``               chats that blocked the bot (set)
notify     ``cmn:{<notify queue>}:sent:<NOT id>``         a delivered notification
notify     ``cmn:{<notify queue>}:status:<GAM id>``       a group game's live status message
=========  ===========================================  ==============================

Nothing else builds these strings; :meth:`Keyspace.patterns` (cleanup, tests) derives from them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

SCORE_QUEUE: Final = "cm"
"""Charged guesses waiting to be scored; one lane per player (``PLR`` id)."""

SETTLE_QUEUE: Final = "cm-settle"
"""Closes waiting to be settled; one lane per game (``GAM`` id)."""

NOTIFY_QUEUE: Final = "cm.notify"
"""Messages waiting to be sent; one lane per chat (the Telegram chat id)."""

COMMANDS_QUEUE: Final = "cm.bot.commands"
"""Telegram updates waiting to be handled; one lane per chat (the Telegram chat id)."""

_PREFIX: Final = re.compile(r"[A-Za-z0-9._-]{0,128}")


@dataclass(frozen=True, slots=True)
class BotKeys:
    """The command worker's keys, under the commands queue's hash tag."""

    queue: str

    def draft(self, chat: int, user: int) -> str:
        """A guess being composed on the inline keyboard by ``user`` in ``chat``."""
        return f"cm:{{{self.queue}}}:draft:{chat}:{user}"

    def starter(self, game: str) -> str:
        """Who started ``game`` (its value: the ``PLR`` id), so their next /play is no join."""
        return f"cm:{{{self.queue}}}:starter:{game}"

    def seen(self, update_id: int) -> str:
        """The record that ``update_id`` was handled (its value: the handling job's id)."""
        return f"cm:{{{self.queue}}}:seen:{update_id}"

    def pattern(self) -> str:
        """A ``SCAN`` pattern matching every key of this family."""
        return f"cm:{{{self.queue}}}:*"


@dataclass(frozen=True, slots=True)
class GameKeys:
    """A game's keys (board, close lock), under the game's own hash tag. ``base`` is
    ``<prefix>cm``; the callers pass checked ``GAM`` ids."""

    base: str

    def board(self, game: str) -> str:
        """The sorted set of best totals of ``game`` (member: ``PLR`` id, score: best total)."""
        return f"{self.base}:{{{game}}}:board"

    def close_lock(self, game: str) -> str:
        """The close lock of ``game``: taken ``NX`` by the settlement that closes it."""
        return f"{self.base}:{{{game}}}:closed"

    def pattern(self) -> str:
        return f"{self.base}:{{GAM*"


@dataclass(frozen=True, slots=True)
class NotifyKeys:
    """The notification stage's keys, under the notify queue's hash tag (the queue's slot,
    shared with its token buckets)."""

    queue: str

    def _key(self, suffix: str) -> str:
        return "cmn:{" + self.queue + "}:" + suffix

    @property
    def blocked(self) -> str:
        """The set of chats that blocked the bot."""
        return self._key("blocked")

    def sent(self, notification: str) -> str:
        """The record that notification ``NOT…`` was delivered (its value: the message id)."""
        return self._key("sent:" + notification)

    def held(self, chat: int) -> str:
        """The notifications kept for a private ``chat`` that refuses the bot (a list)."""
        return self._key(f"held:{chat}")

    def told(self, chat: int, group: int) -> str:
        """Set once ``group`` was told how ``chat``'s user starts the bot."""
        return self._key(f"told:{chat}:{group}")

    def status(self, game: str) -> str:
        """A group game's live status message: its message id and the lines it shows."""
        return self._key(f"status:{game}")

    def pattern(self) -> str:
        return self._key("*")


@dataclass(frozen=True, slots=True)
class Keyspace:
    """One deployment's names: ``prefix`` (``[A-Za-z0-9._-]``, may be empty) goes before every
    queue name and key, so deployments (tests) on one Valkey stay apart."""

    prefix: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.prefix, str) or _PREFIX.fullmatch(self.prefix) is None:
            raise ValueError(f"prefix {self.prefix!r}: up to 128 of [A-Za-z0-9._-]")

    @property
    def score_queue(self) -> str:
        return self.prefix + SCORE_QUEUE

    @property
    def settle_queue(self) -> str:
        return self.prefix + SETTLE_QUEUE

    @property
    def notify_queue(self) -> str:
        return self.prefix + NOTIFY_QUEUE

    @property
    def commands_queue(self) -> str:
        return self.prefix + COMMANDS_QUEUE

    @property
    def queues(self) -> tuple[str, str, str, str]:
        """Every queue of the deployment, in the order a guess meets them."""
        return (self.commands_queue, self.score_queue, self.settle_queue, self.notify_queue)

    @property
    def bot(self) -> BotKeys:
        return BotKeys(self.commands_queue)

    @property
    def game(self) -> GameKeys:
        return GameKeys(self.prefix + "cm")

    @property
    def notify(self) -> NotifyKeys:
        return NotifyKeys(self.notify_queue)

    def patterns(self) -> tuple[str, ...]:
        """``SCAN`` patterns matching every key of codemojex's own (not the queues')."""
        return (self.bot.pattern(), self.game.pattern(), self.notify.pattern())

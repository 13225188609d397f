"""A group game's one live status message: every player's latest scored guess in one message
of the bot's, sent once and then edited as scores arrive, so a loud room costs a few edits a
minute instead of a message per guess (Telegram allows a group 20 a minute).

The status is a hash under the notify queue's tag (:meth:`NotifyKeys.status`): one field per
player (``line:<PLR id>``: the line and its rank), a ``version`` counted up after each line is
set, the ``shown`` version and the ``message`` id once sent. Each score enqueues one status job
carrying the version it made; the job renders the hash as it is when it is sent, and a job whose
version is already shown completes without a send. A backlog thus drains in one edit.

A status edited in place is an answer only while people can see it: each line also keeps the
message id of the guess it scores (``at:<PLR id>``), the newest of which is the bottom of the
group as the game knows it. Once the status message lies more than :data:`SCROLLED_AFTER`
messages above that, the next update is sent anew, as a reply to the newest guess, instead of
edited: the answer lands under the guesses it answers, for the same one token an edit costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from codemojex.keyspace import NotifyKeys
from codemojex.store.kv import Valkey

KEEP: Final = 48 * 3600.0
"""Seconds a status outlives its last update (a game runs 35 hours)."""

SCROLLED_AFTER: Final = 3
"""Messages below the status after which it counts as scrolled away (it is sent anew)."""

MAX_LINES: Final = 40
"""Lines shown, best first: a Telegram message holds 4096 characters."""


@dataclass(frozen=True, slots=True)
class StatusView:
    """One snapshot of a status: its ``version``, the ``shown`` one, the ``message`` (None until
    sent) and its lines, best first."""

    version: int
    shown: int
    message: int | None
    lines: tuple[str, ...]
    bottom: int | None = None
    """The newest guess's message id in the group (None: not known)."""

    @property
    def is_scrolled_away(self) -> bool:
        """Shown, but more than :data:`SCROLLED_AFTER` messages above the newest guess."""
        if self.message is None or self.bottom is None:
            return False
        return self.bottom - self.message > SCROLLED_AFTER

    def render(self, title: str) -> str:
        more = len(self.lines) - MAX_LINES
        tail = [f"… and {more} more"] if more > 0 else []
        return "\n".join([title, *self.lines[:MAX_LINES], *tail])


class StatusBoard:
    """The live statuses of one notify queue (``keys``), on ``kv``."""

    def __init__(self, kv: Valkey, keys: NotifyKeys) -> None:
        self.kv = kv
        self.keys = keys

    async def post(
        self, game: str, player: str, line: str, rank: int, *, at: int | None = None
    ) -> int:
        """Set ``player``'s line (``rank``: higher shows first; ``at``: its guess's message id);
        the version that includes it."""
        fields = {f"line:{player}": f"{rank:06d}|{line}"}
        if at is not None:
            fields[f"at:{player}"] = str(at)
        return await self.kv.post(self.keys.status(game), fields, "version", KEEP)

    async def read(self, game: str) -> StatusView:
        found = await self.kv.fields(self.keys.status(game))
        lines = sorted(
            (value for name, value in found.items() if name.startswith("line:")), reverse=True
        )
        message = found.get("message")
        guesses = [int(value) for name, value in found.items() if name.startswith("at:")]
        return StatusView(
            int(found.get("version", 0)),
            int(found.get("shown", 0)),
            int(message) if message else None,
            tuple(value.partition("|")[2] for value in lines),
            max(guesses, default=None),
        )

    async def shown(self, game: str, version: int, message: int) -> None:
        """``version`` is on screen in ``message``."""
        await self.kv.set_fields(
            self.keys.status(game), {"shown": str(version), "message": str(message)}
        )

    async def lost(self, game: str) -> None:
        """The message cannot be edited (deleted): the next status is sent anew."""
        await self.kv.drop_field(self.keys.status(game), "message")

"""The updates waiting for the bot, in order: long polls wait on them, getUpdates confirms them
by offset, a webhook takes them one by one, and a replay hands one out again."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any


class Wake:
    """Wakes every waiter when something changed; waiters re-check their own condition."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        """Return on the next notify or after ``timeout`` seconds, whichever comes first."""
        event = self._event
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return


@dataclass(frozen=True, slots=True, eq=False)
class Pending:
    """One update waiting for the bot; a replay is handed out once, whatever the offset.

    Compared by identity: a replay and its original are two entries."""

    update_id: int
    update: Any
    is_replay: bool = False


class UpdateLog:
    """Pending updates in order plus every update ever queued (so one can be replayed)."""

    def __init__(self, first_id: int = 1) -> None:
        self._next_id = first_id
        self._pending: list[Pending] = []
        self._all: dict[int, Any] = {}
        self.wake = Wake()

    def next_id(self) -> int:
        update_id = self._next_id
        self._next_id += 1
        return update_id

    def push(self, update: Any) -> None:
        """Queue ``update`` for the bot as given; its ``update_id`` (if an int) keys it for
        replay. Anything else (a malformed update) gets a key of its own, never shown."""
        update_id = update.get("update_id") if isinstance(update, dict) else None
        if isinstance(update_id, int) and not isinstance(update_id, bool):
            key = update_id
            # Telegram's ids only grow: what comes after an explicit id gets a larger one.
            self._next_id = max(self._next_id, update_id + 1)
        else:
            key = self.next_id()
        self._all[key] = update
        self._pending.append(Pending(key, update))
        self.wake.notify()

    def replay(self, update_id: int) -> Any:
        """Queue an already queued update again, ahead of the rest; None if never queued."""
        update = self._all.get(update_id)
        if update is None:
            return None
        self._pending.insert(0, Pending(update_id, update, is_replay=True))
        self.wake.notify()
        return update

    def confirm(self, offset: int) -> None:
        """Forget updates with an id below ``offset`` (Telegram's getUpdates confirmation)."""
        self._pending = [p for p in self._pending if p.is_replay or p.update_id >= offset]

    def take(self, limit: int) -> list[Any]:
        """Up to ``limit`` pending updates, replays first; replays are handed out only once."""
        batch = self._pending[:limit]
        self._pending = [p for p in self._pending if not (p.is_replay and p in batch)]
        return [p.update for p in batch]

    def first(self) -> Pending | None:
        return self._pending[0] if self._pending else None

    def done(self, pending: Pending) -> None:
        """A webhook took ``pending``: it is no longer waiting."""
        if pending in self._pending:
            self._pending.remove(pending)

    def drop_all(self) -> None:
        self._pending.clear()

    def __len__(self) -> int:
        return len(self._pending)

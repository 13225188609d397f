"""A small bounded memo for facts that never change once written (a started game's keyboard,
secret and room; a player's name), so the hot paths skip re-reading them from SQL.

One per service instance, never module-level; the least recently used entry goes first.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Memo(Generic[K, V]):
    """At most ``size`` entries; :meth:`get` refreshes an entry, :meth:`put` may evict one."""

    def __init__(self, size: int = 1024) -> None:
        if size < 1:
            raise ValueError(f"size {size!r}: at least 1")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The entry of ``key``, or ``None``."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> V:
        """Remember ``value`` under ``key`` and return it."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._entries)

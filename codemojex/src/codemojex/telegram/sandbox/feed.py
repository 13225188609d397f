"""Fan-out of the sandbox's live events (new and edited messages, callback answers, stats) to
every open server-sent-events stream of the chat page."""

from __future__ import annotations

import asyncio
import json
from typing import Any

_BACKLOG = 1000
"""Events a stream may fall behind by before it is dropped (the page then reconnects)."""


class Feed:
    """Each subscriber gets its own queue; ``None`` in it means the sandbox is stopping."""

    def __init__(self) -> None:
        self._subscribers: set[asyncio.Queue[str | None]] = set()

    def subscribe(self) -> asyncio.Queue[str | None]:
        queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=_BACKLOG)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[str | None]) -> None:
        self._subscribers.discard(queue)

    @property
    def is_watched(self) -> bool:
        """True while some stream is open (events are only framed for someone)."""
        return bool(self._subscribers)

    def publish(self, event: str, data: dict[str, Any]) -> None:
        """Send one event to every stream, framed as SSE; a stream too far behind is closed."""
        if not self._subscribers:
            return
        frame = self.frame(event, data)
        for queue in list(self._subscribers):
            try:
                queue.put_nowait(frame)
            except asyncio.QueueFull:
                self._subscribers.discard(queue)
                self._end(queue)

    @staticmethod
    def frame(event: str, data: dict[str, Any]) -> str:
        """One server-sent event: its name and its data as one line of JSON."""
        return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"

    def close(self) -> None:
        """End every stream (the sandbox stops)."""
        for queue in list(self._subscribers):
            self._end(queue)
        self._subscribers.clear()

    @staticmethod
    def _end(queue: asyncio.Queue[str | None]) -> None:
        while True:
            try:
                queue.put_nowait(None)
                return
            except asyncio.QueueFull:
                queue.get_nowait()

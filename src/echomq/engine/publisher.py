"""A queue's lifecycle events: published host-side after each transition, only while someone
listens, fire-and-forget (at most once).

``PUBSUB NUMSUB`` is asked at most once a second, so a busy queue with no subscriber pays
nothing for its events; on a cluster, events ride sharded pub/sub on the queue's own slot.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
from collections.abc import Iterable
from typing import Any

from echomq.engine.events import Subscription
from echomq.engine.keys import Keyspace
from echomq.wire.connector import Command
from echomq.wire.pool import Wire, dedicated

LISTENER_CHECK_INTERVAL = 1.0  # seconds between PUBSUB NUMSUB checks of the events channel


def _swallow(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # fire-and-forget: retrieve, so nothing logs "never retrieved"


class Publisher:
    """The event channel of one queue: whether it is listened to, and what goes out on it."""

    def __init__(self, wire: Wire, keys: Keyspace, *, enabled: bool) -> None:
        self._wire = wire
        self._channel = keys.events
        self.is_enabled = enabled
        self._has_listeners = False
        self._checked_at = -math.inf
        self._subscribed_at = -math.inf
        self._sharded = bool(getattr(wire, "is_cluster", False))
        self._publish = "SPUBLISH" if self._sharded else "PUBLISH"
        self._numsub = "SHARDNUMSUB" if self._sharded else "NUMSUB"

    def listened(self) -> bool:
        """Whether events should go out now; asks the server at most once a second."""
        if not self.is_enabled:
            return False
        now = asyncio.get_running_loop().time()
        if now - self._checked_at >= LISTENER_CHECK_INTERVAL:
            self._checked_at = now
            asked = asyncio.ensure_future(self._wire.call("PUBSUB", self._numsub, self._channel))
            asked.add_done_callback(functools.partial(self._counted, now))
        return self._has_listeners

    def emit(self, events: Iterable[dict[str, Any]]) -> None:
        """Publish events, fire-and-forget (at most once)."""
        commands: list[Command] = [
            (self._publish, self._channel, json.dumps(event, separators=(",", ":")))
            for event in events
        ]
        if not commands:
            return
        sent = asyncio.ensure_future(self._wire.call_many(commands))
        sent.add_done_callback(_swallow)

    def _counted(self, asked_at: float, asked: asyncio.Future[Any]) -> None:
        if asked.cancelled() or asked.exception() is not None:
            return
        # A subscribe() in this process after the question was sent outranks its answer.
        self._has_listeners = int(asked.result()[1]) > 0 or self._subscribed_at >= asked_at

    def subscribe(self) -> Subscription:
        """A subscriber of the channel, on a connection of its own."""
        self._has_listeners = True  # publish at once; the next check will see the subscriber
        self._subscribed_at = self._checked_at = asyncio.get_running_loop().time()
        return Subscription(
            self._wire.options,
            self._channel,
            sharded=self._sharded,
            connect=functools.partial(dedicated, self._wire, self._channel),
        )

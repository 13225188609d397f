"""Lifecycle events: a subscriber of a queue's ``emq:{q}:events`` channel.

Events are published host-side after a transition, fire-and-forget and at most once: a
subscriber that is disconnected at publish time misses them. The subscriber re-subscribes by
itself after its socket is lost. On a cluster it is a sharded subscriber (``SSUBSCRIBE``) on the
node owning the channel's slot, and follows the slot when it moves.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

from echomq.errors import ServerError, WireTimeout, server_error
from echomq.wire.connector import UNSOLICITED, Connector
from echomq.wire.pool import Wire, dedicated
from echomq.wire.url import ConnectionOptions


class Subscription:
    """``async with queue.subscribe() as events: async for event in events: …``

    Each event is a dict with at least ``event`` and ``job``.
    """

    def __init__(
        self,
        options: ConnectionOptions,
        channel: str,
        *,
        maxsize: int = 10_000,
        sharded: bool = False,
        connect: Callable[..., Connector] | None = None,
    ) -> None:
        self.channel = channel
        self.sharded = sharded
        self._kinds = (b"smessage", b"ssubscribe") if sharded else (b"message", b"subscribe")
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize)
        self._subscribed = asyncio.Condition()
        #: Subscriptions confirmed so far: 1 after the first, +1 after each re-subscription.
        self.generation = 0
        #: The server's refusal of the subscription (``NOPERM``), once it answered one.
        self.refusal: ServerError | None = None
        self.dropped = 0
        #: The tasks it started and that have not ended: the loop holds tasks weakly, so a
        #: task nothing else references could be collected mid-flight.
        self._tasks: set[asyncio.Task[None]] = set()
        self.connector = (connect or functools.partial(Connector, options))(
            version_fence=None, on_push=self._on_push, on_connect=self._on_connect
        )

    async def _on_connect(self, connector: Connector) -> None:
        connector.send_no_reply("SSUBSCRIBE" if self.sharded else "SUBSCRIBE", self.channel)

    def _on_push(self, frame: list[Any]) -> None:
        kind = frame[0]
        if kind == self._kinds[0] and frame[1].decode() == self.channel:
            self._deliver(frame[2])
        elif kind == self._kinds[1]:
            self.generation += 1
            self._confirmed()
            self._start(self._notify())
        elif kind == UNSOLICITED and _is_refusal(frame[1]):
            # The server refused the subscription itself (NOPERM: a user without rights on the
            # channel): no reconnect will change that, and a wait for it should say so, not
            # time out.
            self.refusal = server_error(str(frame[1]))
            self._start(self._notify())
        elif (kind == b"sunsubscribe" or kind == UNSOLICITED) and self.sharded:
            # The server let go of us (sunsubscribe), or refused the SSUBSCRIBE (a MOVED from a
            # node that no longer owns the slot, on a stale map): the channel's slot is
            # elsewhere. Follow it; the reconnect subscribes there.
            retarget = getattr(self.connector, "retarget", None)
            if retarget is not None:
                self._start(retarget(moved=True))

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in a task held until it ends (or :meth:`close` cancels it)."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _deliver(self, message: bytes) -> None:
        """One message of the channel (a subclass may read it otherwise: see waiters.py)."""
        try:
            event = json.loads(message)
        except ValueError:
            return
        try:
            self._inbox.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1  # a slow reader loses events, never the queue's work

    def _confirmed(self) -> None:
        """The server confirmed a (re-)subscription: ``generation`` was just counted up."""

    async def _notify(self) -> None:
        async with self._subscribed:
            self._subscribed.notify_all()

    async def wait_subscribed(self, after: int = 0, timeout: float = 5.0) -> None:
        """Until a subscription newer than generation ``after`` is confirmed by the server."""

        async def newer() -> None:
            async with self._subscribed:
                await self._subscribed.wait_for(
                    lambda: self.generation > after or self.refusal is not None
                )

        await asyncio.wait_for(newer(), timeout)
        if self.generation <= after and self.refusal is not None:
            raise self.refusal

    async def __aenter__(self) -> Subscription:
        await self.connector.connect()
        await self.wait_subscribed(0, self.connector.options.connect_timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection and end the tasks the subscription started (a retarget, a
        notification), so none is left pending when the loop closes."""
        await self.connector.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def get(self) -> dict[str, Any]:
        return await self._inbox.get()

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            yield await self._inbox.get()


class Subscriptions(Subscription):
    """Many channels as one subscription, one inbox: a sharded queue's events, each shard
    publishing on its own channel (on a cluster each channel is subscribed on the node owning
    its shard). ``async with``, ``get`` and ``async for`` as :class:`Subscription`'s; each
    channel's subscription, in :attr:`parts`, re-subscribes by itself."""

    def __init__(self, parts: Sequence[Subscription]) -> None:
        # Not Subscription.__init__: the connections are the parts'. The first part's inbox is
        # everyone's, so its bound holds for the events of all.
        first = parts[0]
        self.parts = tuple(parts)
        self.channel = first.channel
        self.sharded = first.sharded
        self._kinds = first._kinds
        self._inbox = first._inbox
        for part in self.parts[1:]:
            part._inbox = self._inbox
        self._subscribed = first._subscribed
        self.generation = 0
        self.refusal = None
        self._tasks = set()
        self.connector = first.connector

    @property
    def dropped(self) -> int:
        """Events dropped because the inbox was full, over every channel."""
        return sum(part.dropped for part in self.parts)

    @dropped.setter
    def dropped(self, count: int) -> None:
        """Each channel counts its own: the sum is read, never set."""

    async def wait_subscribed(self, after: int = 0, timeout: float = 5.0) -> None:
        """Until every channel has a subscription newer than generation ``after``."""
        await asyncio.gather(*(part.wait_subscribed(after, timeout) for part in self.parts))

    async def __aenter__(self) -> Subscriptions:
        try:
            await asyncio.gather(*(part.__aenter__() for part in self.parts))
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        await asyncio.gather(*(part.close() for part in self.parts))


class ShardChannel(Subscription):
    """A sharded subscription whose messages and confirmations go to its owner's hooks (no
    inbox), on a connection of its own to the node owning the channel: the engine's own
    channels (the waiter hub's ``done``, the cancel hub's ``cancel``)."""

    def __init__(self, wire: Wire, channel: str) -> None:
        super().__init__(
            wire.options,
            channel,
            maxsize=1,
            sharded=True,  # the scripts SPUBLISH on standalone servers as on a cluster
            connect=functools.partial(dedicated, wire, channel),
        )

    async def open(self) -> None:
        """Connect and wait until the server confirmed the subscription; closed on failure."""
        connector = self.connector
        try:
            await connector.connect()
            try:
                await self.wait_subscribed(0, connector.options.connect_timeout)
            except TimeoutError:
                raise WireTimeout(
                    f"SSUBSCRIBE {self.channel} was not confirmed", address=connector.address
                ) from None
        except BaseException:
            await self.close()
            raise


#: Error replies to a subscribe that say where the channel is, not that it is refused.
_ELSEWHERE = ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN")


def _is_refusal(reply: Any) -> bool:
    """An error reply to a subscribe that no retry or retarget will change (``NOPERM`` …)."""
    text = str(reply)
    return isinstance(reply, Exception) and not text.startswith(_ELSEWHERE)

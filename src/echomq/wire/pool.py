"""The pool: N pipelined connectors behind one ``call``, dispatched round-robin.

Processes are concurrency, sockets are parallelism: a pool of N connectors lets N flushes be in
flight at once. Blocking reads and pub/sub never go through the pool; they hold a dedicated
connector of their own (:meth:`Pool.dedicated`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from echomq.errors import InvalidArgument
from echomq.wire.connector import WIRE_VERSION, Arg, Command, Connector
from echomq.wire.url import ConnectionOptions


class Wire(Protocol):
    """What the queue needs from the network: one command, or a pipeline in caller order.

    :class:`Connector` and :class:`Pool` implement it; a cluster router implements the same
    surface by routing each command on the slot of its first key.
    """

    options: ConnectionOptions

    def call(self, *args: Arg) -> Awaitable[Any]: ...

    def call_many(self, commands: Sequence[Command]) -> Awaitable[list[Any]]: ...

    async def close(self) -> None: ...


class Pool:
    """A fixed set of connectors; each call goes to the next one (lock-free round robin)."""

    def __init__(
        self,
        options: ConnectionOptions,
        size: int = 4,
        *,
        version_fence: str | None = WIRE_VERSION,
    ) -> None:
        if size < 1:
            raise InvalidArgument("pool size", size, "must be at least 1")
        self.options = options
        self.version_fence = version_fence
        self.members = [Connector(options, version_fence=version_fence) for _ in range(size)]
        # next() on itertools.count is atomic: no lock even with threads around.
        self._turn = itertools.count()

    @property
    def size(self) -> int:
        return len(self.members)

    async def connect(self) -> Pool:
        try:
            await asyncio.gather(*(member.connect() for member in self.members))
        except BaseException:
            await self.close()
            raise
        return self

    async def close(self) -> None:
        await asyncio.gather(*(member.close() for member in self.members))

    async def __aenter__(self) -> Pool:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def call(self, *args: Arg) -> Awaitable[Any]:
        members = self.members
        return members[next(self._turn) % len(members)].call(*args)

    def call_many(self, commands: Sequence[Command]) -> Awaitable[list[Any]]:
        members = self.members
        return members[next(self._turn) % len(members)].call_many(commands)

    def call_durable(self, commands: Sequence[Command], wait: Command) -> Awaitable[list[Any]]:
        """:meth:`Connector.call_durable` on the next connector: the wait on the same socket."""
        members = self.members
        return members[next(self._turn) % len(members)].call_durable(commands, wait)

    def cork(self) -> Callable[[], None]:
        """:meth:`Connector.cork` on every member; the function returned uncorks them all."""
        uncorks = [member.cork() for member in self.members]

        def uncork() -> None:
            for each in uncorks:
                each()

        return uncork

    def dedicated(self, **kwargs: Any) -> Connector:
        """A new connector outside the pool, for a blocking read or a subscription."""
        kwargs.setdefault("version_fence", self.version_fence)
        return Connector(self.options, **kwargs)


def call_durable(wire: Wire, commands: Sequence[Command], wait: Command) -> Awaitable[list[Any]]:
    """``commands`` then ``wait`` (``WAITAOF``) on the connection that carries them: the replies,
    the wait's last. A connector, a pool and a cluster router share one wait among the
    pipelines of a flush; any other wire sends the wait at the end of the same pipeline."""
    send = getattr(wire, "call_durable", None)
    if send is not None:
        sent: Awaitable[list[Any]] = send(commands, wait)
        return sent
    return wire.call_many([*commands, wait])


def dedicated(wire: Wire, key: str, **kwargs: Any) -> Connector:
    """A connector of its own for a blocking read or a subscription on ``key``: on a cluster,
    one bound to the node that owns ``key``'s slot (and follows it); else one to the server."""
    kwargs.setdefault("version_fence", None)
    route = getattr(wire, "dedicated_for", None)
    if route is not None:
        connector: Connector = route(key, **kwargs)
        return connector
    return Connector(wire.options, **kwargs)

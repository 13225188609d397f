"""The connector: one socket to one server, auto-pipelined.

Every command any task issues in the same event-loop tick goes out in one ``write`` (on an idle
socket the first goes at once, so a lone caller waits for no loop turn); replies are
parsed by ``hiredis`` and matched to their callers strictly in order. A dropped socket fails the
calls in flight with :class:`Disconnected` (never replayed) and the connector reconnects in the
background with capped, jittered backoff; calls issued meanwhile wait for the new socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import hiredis

from echomq.errors import (
    AuthError,
    Closed,
    ConnectError,
    Disconnected,
    EchoMQError,
    Overloaded,
    VersionFenceError,
    WireError,
    WireTimeout,
    server_error,
)
from echomq.wire.handshake import check_handshake, handshake, tls_context
from echomq.wire.url import ConnectionOptions

log = logging.getLogger("echomq.wire")

#: The wire version fenced in ``{emq}:version``: bumped when the keyspace or a script's contract
#: changes incompatibly, so old and new workers never share a deployment.
WIRE_VERSION: Final = "echomq:8"

Arg = bytes | str | int | float
Command = Sequence[Arg]
PushHandler = Callable[[list[Any]], None]

_NEED_MORE: Final = object()
_ReplyError: Final = hiredis.ReplyError
_Push: Final = hiredis.PushNotification
_pack: Final[Callable[[tuple[Arg, ...]], bytes]] = hiredis.pack_command  # type: ignore[assignment]

#: A write buffer this full goes out at once rather than at the end of the tick, so the server
#: works on the head of a long pipeline while the client still encodes its tail.
FLUSH_AT = 32 * 1024
#: The kind of the frame an unsolicited reply reaches ``on_push`` as: ``[UNSOLICITED, reply]``.
UNSOLICITED = b"unsolicited"
_BACKOFF_START = 0.1
_BACKOFF_MAX = 2.0


class _Gather:
    """The pending entry of a pipeline: collects ``n`` replies, then resolves one future (a
    ``held`` one only once the shared wait of its flush answered, see :class:`_SharedWait`).
    ``then``: the waits to write once this (a flush's last held) pipeline's replies are in."""

    __slots__ = ("future", "held", "left", "replies", "then")

    def __init__(self, future: asyncio.Future[list[Any]], n: int, held: bool = False) -> None:
        self.future = future
        self.left = n
        self.held = held
        self.replies: list[Any] = []
        self.then: list[_SharedWait] | None = None

    def add(self, reply: Any) -> bool:
        """Take the next reply; True once the last one arrived."""
        if type(reply) is _ReplyError:
            reply = server_error(str(reply))
        self.replies.append(reply)
        self.left -= 1
        if self.left:
            return False
        if not self.held and not self.future.done():
            self.future.set_result(self.replies)
        return True

    def finish(self, reply: Any) -> None:
        """A held pipeline's last reply: the wait that covers it."""
        if not self.future.done():
            self.replies.append(reply)
            self.future.set_result(self.replies)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)
        then, self.then = self.then, None  # a wait fails its pipelines, this one among them
        if then is not None:  # the pipelines before this one have no entry left to fail
            for shared in then:
                shared.fail(exc)


class _SharedWait(_Gather):
    """One ``WAITAOF`` (or ``WAIT``) for every pipeline of a flush that asked for it, written
    after them on the same socket: its one reply ends each of those pipelines
    (:meth:`Connector.call_durable`). A wait blocks its connection until answered, so one per
    flush, not one per caller. One that counts replicas' fsyncs goes out only once the
    replies of those pipelines are in (``is_after_replies``, see :func:`_is_after_replies`);
    any other at the end of the flush itself."""

    __slots__ = ("command", "gathers", "is_after_replies")

    def __init__(self, future: asyncio.Future[list[Any]], command: tuple[Arg, ...]) -> None:
        super().__init__(future, 1)
        self.command = _pack(command)
        self.is_after_replies = _is_after_replies(command)
        self.gathers: list[_Gather] = []

    def add(self, reply: Any) -> bool:
        if type(reply) is _ReplyError:
            reply = server_error(str(reply))
        for gather in self.gathers:
            gather.finish(reply)
        return True

    def fail(self, exc: BaseException) -> None:
        for gather in self.gathers:
            gather.fail(exc)


def _is_after_replies(wait: tuple[Arg, ...]) -> bool:
    """Whether ``wait`` must go out after the replies of the writes it covers, not with them.

    A ``WAITAOF`` that counts replicas (``numreplicas`` > 0) makes the primary ask its replicas
    for their fsynced offset (``REPLCONF GETACK``) right away, in the same write to them as the
    writes it waits for: a replica reads both at once and answers with the offset it fsynced
    *before* those writes (it fsyncs only after the read), so the wait is confirmed only by the
    replica's next unsolicited ack, up to a second later. Sent after the write replies, the
    replica has read and fsynced them (``appendfsync always``) when the ask comes, unless it
    was too busy to read them till then: one more round trip, not a second
    (bench/durable_enqueue.py). A local-only ``WAITAOF``, or a ``WAIT``, is answered as soon
    as the server fsynced (or the replicas read the writes): no need."""
    name = wait[0].decode() if isinstance(wait[0], bytes) else str(wait[0])
    return name.upper() == "WAITAOF" and int(wait[2]) > 0


class _Protocol(asyncio.Protocol):
    """Parses replies off the socket and resolves the pending entries in order."""

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self.reader = hiredis.Reader(notEnoughData=_NEED_MORE)
        self.transport: asyncio.Transport | None = None
        self.pending: deque[asyncio.Future[Any] | _Gather] = deque()
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Any loop's stream transport (uvloop's is not an ``asyncio.Transport`` subclass, but it
        # has the same ``write``/``abort``/``close``), so no isinstance check here.
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        pending = self.pending
        connector = self.connector
        connector.last_reply_at = time.monotonic()
        while True:
            try:
                reply = reader.gets()
            except hiredis.ProtocolError as exc:
                connector._protocol_error(self, exc)
                return
            if reply is _NEED_MORE:
                return
            if type(reply) is _Push:
                connector._push(reply)
                continue
            if not pending:
                # A reply no call waits for: a subscriber's refused SSUBSCRIBE (a MOVED from a
                # node that no longer owns the slot) goes to its push handler, which decides;
                # on any other connection it means the replies are out of step: start over.
                if connector.on_push is None:
                    connector._protocol_error(self, ValueError("a reply no call waits for"))
                    return
                connector._push([UNSOLICITED, reply])
                continue
            entry = pending[0]
            if isinstance(entry, _Gather):
                if entry.add(reply):
                    pending.popleft()
                    if entry.then is not None:
                        connector._send_waits(self, entry.then)
                continue
            pending.popleft()
            if not entry.done():
                if type(reply) is _ReplyError:
                    entry.set_exception(server_error(str(reply)))
                else:
                    entry.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)
        self.connector._lost(self, exc)


def _no_op() -> None:
    return None


class Connector:
    """One pipelined connection. ``call`` for one command, ``call_many`` for a pipeline.

    A pipeline's error replies are returned in place as :class:`ServerError` instances so one bad
    item never breaks the rest; a single ``call`` raises its error reply.
    """

    def __init__(
        self,
        options: ConnectionOptions,
        *,
        version_fence: str | None = WIRE_VERSION,
        on_push: PushHandler | None = None,
        on_connect: Callable[[Connector], Awaitable[None]] | None = None,
        max_pending: int = 50_000,
    ) -> None:
        self.options = options
        self.version_fence = version_fence
        self.on_push = on_push
        self.on_connect = on_connect
        self.max_pending = max_pending
        self.last_reply_at = 0.0
        self.reconnects = 0
        self.writes = 0
        self._proto: _Protocol | None = None
        self._wbuf = bytearray()
        self._waits: dict[tuple[Arg, ...], _SharedWait] = {}  # for the unflushed buffer
        self._flush_scheduled = False
        self._closed = False
        self._ready: asyncio.Event | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._grace_until = 0.0
        self._established = False  # a socket was up once: losing it means reconnecting
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return self.options.address

    @property
    def established(self) -> bool:
        """A socket was up once: losing it now means reconnecting, not a first connect."""
        return self._established

    @property
    def is_connected(self) -> bool:
        """The socket is up and its handshake done (a socket mid-handshake is not connected)."""
        return self._proto is not None and self._ready is not None and self._ready.is_set()

    async def connect(self) -> Connector:
        """Open the socket and run the handshake; raises a typed error on failure."""
        if self._closed:
            raise Closed("connector is closed", address=self.address)
        self._loop = asyncio.get_running_loop()
        if self._ready is None:
            self._ready = asyncio.Event()
        if self._proto is None:
            await self._open()
        return self

    async def close(self) -> None:
        """Close the socket; calls in flight fail with :class:`Closed`."""
        self._closed = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reconnect_task
            self._reconnect_task = None
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        proto, self._proto = self._proto, None
        if self._ready is not None:
            self._ready.set()  # release waiters; they see _closed
        if proto is not None:
            self._fail_pending(proto, Closed("connector closed", address=self.address))
            if proto.transport is not None:
                proto.transport.close()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(proto.lost), 1.0)

    async def __aenter__(self) -> Connector:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- calls -------------------------------------------------------------------------------

    def call(self, *args: Arg) -> Awaitable[Any]:
        """Send one command; the awaitable resolves to its reply or raises its error."""
        proto = self._proto
        if proto is None:
            return self._call_later(args)
        if len(proto.pending) >= self.max_pending:
            raise Overloaded(f"{self.max_pending} calls in flight", address=self.address)
        future: asyncio.Future[Any] = self._loop.create_future()  # type: ignore[union-attr]
        self._wbuf += _pack(args)
        pending = proto.pending
        if not pending:
            self.last_reply_at = time.monotonic()  # the watchdog measures from the oldest call
            pending.append(future)
            if not self._flush_scheduled:
                # An idle connection: nothing to coalesce with yet, so write at once and spare
                # a sequential caller a turn of the event loop; later calls of this tick are
                # still coalesced into one more write.
                self._flush()
            return future
        pending.append(future)
        if not self._flush_scheduled:
            self._schedule_flush()
        return future

    def call_many(self, commands: Sequence[Command]) -> Awaitable[list[Any]]:
        """Send a pipeline in one write; resolves to one reply per command, in order.

        Error replies come back in place as :class:`ServerError` values.
        """
        if self._proto is None:
            return self._call_many_later(commands)
        return self._pipeline(commands, None)

    def call_durable(self, commands: Sequence[Command], wait: Command) -> Awaitable[list[Any]]:
        """:meth:`call_many`, then ``wait`` (``WAITAOF``/``WAIT``), on this socket: resolves to
        the commands' replies and, last, the wait's. The pipelines of one flush share one wait,
        written after all of them: it covers every write before it on the connection, and a
        wait blocks the connection until it is answered (one per caller would queue them). A
        ``WAITAOF`` that counts replicas goes out once their replies are in, on this socket
        (:func:`_is_after_replies`); a socket lost before fails them all, wait or not."""
        if self._proto is None:
            return self._call_durable_later(commands, wait)
        return self._pipeline(commands, wait)

    def _pipeline(self, commands: Sequence[Command], wait: Command | None) -> Awaitable[list[Any]]:
        """``commands`` into the write buffer as one pending entry, held for the flush's shared
        ``wait`` when one is given; written at once on an idle connection (see ``call``)."""
        proto = self._proto
        assert proto is not None
        if not commands:
            raise ValueError("a pipeline needs at least one command")
        if len(proto.pending) >= self.max_pending:
            raise Overloaded(f"{self.max_pending} calls in flight", address=self.address)
        future: asyncio.Future[list[Any]] = self._loop.create_future()  # type: ignore[union-attr]
        wbuf = self._wbuf
        for command in commands:
            wbuf += _pack(tuple(command))
        is_idle = not proto.pending
        if is_idle:
            self.last_reply_at = time.monotonic()
        gather = _Gather(future, len(commands), held=wait is not None)
        if wait is not None:
            key = tuple(wait)
            shared = self._waits.get(key)
            if shared is None:
                shared = self._waits[key] = _SharedWait(future, key)
            shared.gathers.append(gather)
        proto.pending.append(gather)
        if len(wbuf) >= FLUSH_AT or (is_idle and not self._flush_scheduled):
            self._flush()  # a full buffer, or an idle connection
        elif not self._flush_scheduled:
            self._schedule_flush()
        return future

    def cork(self) -> Callable[[], None]:
        """Hold the calls made from now on in the buffer (no write at once on an idle
        connection) until the returned function is called, which writes them in one go.

        For calls that tasks started together make on their first step (a consumer's settles
        and its next claim): call the returned function with ``loop.call_soon`` right after
        starting them, so it runs after their first steps. With a write already due, or no
        socket, there is nothing to hold."""
        if self._proto is None or self._flush_scheduled:
            return _no_op
        self._flush_scheduled = True  # calls buffer as if a flush were due
        return self._uncork

    def _uncork(self) -> None:
        self._flush_scheduled = False
        if self._wbuf:
            self._flush()

    def send_no_reply(self, *args: Arg) -> None:
        """Send a command whose answer arrives as push frames (RESP3 SUBSCRIBE and friends)."""
        if self._proto is None:
            raise Disconnected("not connected", address=self.address)
        self._wbuf += _pack(args)
        if not self._flush_scheduled:
            self._schedule_flush()

    async def call_blocking(self, timeout: float, *args: Arg) -> Any:
        """A blocking command (``BLPOP k timeout``): the call timeout stretches by ``timeout``."""
        self._grace_until = max(self._grace_until, time.monotonic() + timeout)
        return await self.call(*args)

    async def _call_later(self, args: tuple[Arg, ...]) -> Any:
        deadline = await self._wait_live()
        return await self._within(self.call(*args), deadline)

    async def _call_many_later(self, commands: Sequence[Command]) -> list[Any]:
        deadline = await self._wait_live()
        replies: list[Any] = await self._within(self.call_many(commands), deadline)
        return replies

    async def _call_durable_later(self, commands: Sequence[Command], wait: Command) -> list[Any]:
        deadline = await self._wait_live()
        replies: list[Any] = await self._within(self.call_durable(commands, wait), deadline)
        return replies

    async def _wait_live(self) -> float:
        """Wait until a socket has passed its handshake; returns the call's deadline.

        The call's timeout is counted once, from the call: a call that waits through several
        reconnects (the socket dropped again before it was written) keeps its first deadline,
        and loops rather than recursing.
        """
        loop = self._loop or asyncio.get_running_loop()
        deadline = loop.time() + self.options.call_timeout
        while True:
            if self._closed:
                raise Closed("connector is closed", address=self.address)
            if self._ready is None:
                raise Disconnected("connector was never connected", address=self.address)
            if self._proto is not None:
                return deadline
            try:
                await asyncio.wait_for(self._ready.wait(), max(deadline - loop.time(), 0.0))
            except TimeoutError:
                raise WireTimeout(
                    f"not connected within {self.options.call_timeout}s", address=self.address
                ) from None

    async def _within(self, call: Awaitable[Any], deadline: float) -> Any:
        """``call`` awaited until ``deadline`` (loop time) at the latest."""
        loop = self._loop or asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(call, max(deadline - loop.time(), 0.0))
        except TimeoutError:
            raise WireTimeout(
                f"no reply within {self.options.call_timeout}s", address=self.address
            ) from None

    def _schedule_flush(self) -> None:
        self._flush_scheduled = True
        self._loop.call_soon(self._flush)  # type: ignore[union-attr]

    def _flush(self) -> None:
        self._flush_scheduled = False
        proto = self._proto
        if proto is None or proto.transport is None or not self._wbuf:
            self._wbuf.clear()
            self._waits.clear()  # their pipelines failed with the socket
            return
        if self._waits:
            for shared in self._waits.values():
                if shared.is_after_replies:
                    last = shared.gathers[-1]  # replies arrive in order: the others' are in too
                    last.then = [shared] if last.then is None else [*last.then, shared]
                else:
                    self._wbuf += shared.command
                    proto.pending.append(shared)
            self._waits.clear()
        data = bytes(self._wbuf)
        self._wbuf.clear()
        self.writes += 1
        proto.transport.write(data)
        if self._watchdog is None:
            self._arm_watchdog()

    def _send_waits(self, proto: _Protocol, waits: list[_SharedWait]) -> None:
        """Write ``waits`` after the replies of the pipelines they cover arrived on ``proto``:
        on that socket, or on none (a socket replaced meanwhile fails them, never carries
        them). Behind whatever is buffered, as that is already pending before them."""
        if proto is not self._proto or proto.transport is None:
            lost = Disconnected("connection lost before the wait was sent", address=self.address)
            for shared in waits:
                shared.fail(lost)
            return
        for shared in waits:
            self._wbuf += shared.command
            proto.pending.append(shared)
        if not self._flush_scheduled:
            self._flush()

    # -- watchdog: one timer per connector instead of a timeout per call ---------------------

    def _arm_watchdog(self) -> None:
        interval = min(1.0, self.options.call_timeout / 4)
        self._watchdog = self._loop.call_later(interval, self._check_stuck)  # type: ignore[union-attr]

    def _check_stuck(self) -> None:
        self._watchdog = None
        proto = self._proto
        if proto is None or not proto.pending:
            return
        now = time.monotonic()
        if now > max(self.last_reply_at, self._grace_until) + self.options.call_timeout:
            log.warning(
                "no reply from %s for %.1fs; dropping the socket",
                self.address,
                now - self.last_reply_at,
            )
            self._drop(
                proto,
                WireTimeout(f"no reply within {self.options.call_timeout}s", address=self.address),
                "no reply",
            )
            return
        self._arm_watchdog()

    # -- connection management ---------------------------------------------------------------

    async def _open(self) -> None:
        opts = self.options
        loop = asyncio.get_running_loop()
        tls = tls_context(opts)
        try:
            _, proto = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Protocol(self),
                    opts.host,
                    opts.port,
                    ssl=tls,
                    server_hostname=opts.host if tls else None,
                ),
                opts.connect_timeout,
            )
        except TimeoutError:
            raise WireTimeout(
                f"connect timed out after {opts.connect_timeout}s", address=self.address
            ) from None
        except ssl.SSLError as exc:
            raise ConnectError(f"TLS handshake failed: {exc}", address=self.address) from exc
        except OSError as exc:
            raise ConnectError(
                f"cannot connect: {exc.strerror or exc}", address=self.address
            ) from exc
        assert isinstance(proto, _Protocol)
        # The socket stays private until its handshake has passed: a caller that found it
        # published could write before ``HELLO 3``/``AUTH``/``SELECT`` (a write in the wrong
        # database, a ``NOAUTH``, a RESP2 reply).
        try:
            await asyncio.wait_for(self._handshake(proto), opts.connect_timeout)
            if proto.lost.done():
                raise Disconnected("connection lost during the handshake", address=self.address)
            self.last_reply_at = time.monotonic()
            self._proto = proto
            if self.on_connect is not None:
                await self.on_connect(self)
            if self._closed:
                raise Closed("connector closed while connecting", address=self.address)
            if proto.lost.done():
                raise Disconnected("connection lost during the handshake", address=self.address)
        except BaseException as exc:
            if self._proto is proto:
                self._proto = None
                self._wbuf.clear()
                self._waits.clear()
            self._fail_pending(proto, Disconnected("connection lost", address=self.address))
            if proto.transport is not None:
                proto.transport.abort()
                if not isinstance(exc, asyncio.CancelledError):
                    # Let the socket really close before the caller hears of the failure.
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(asyncio.shield(proto.lost), 1.0)
            if isinstance(exc, asyncio.TimeoutError):
                raise WireTimeout("handshake timed out", address=self.address) from None
            raise
        if self._established:
            self.reconnects += 1  # counted before anyone can see the connector ready again
        self._established = True
        if self._ready is not None:
            self._ready.set()

    async def _handshake(self, proto: _Protocol) -> None:
        """The handshake, written straight to ``proto``'s socket (not yet published)."""
        commands = handshake(self.options, self.version_fence)
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        proto.pending.append(_Gather(future, len(commands)))
        if proto.transport is None or proto.lost.done():
            raise Disconnected("connection lost before the handshake", address=self.address)
        proto.transport.write(b"".join(_pack(tuple(command)) for command in commands))
        check_handshake(await future, self.version_fence, self.address)

    def _lost(self, proto: _Protocol, exc: Exception | None) -> None:
        n = len(proto.pending)
        lost = Disconnected(
            f"connection lost with {n} call(s) in flight; they may or may not have run "
            "and are not replayed",
            address=self.address,
        )
        self._drop(proto, lost, str(exc or "closed by peer"))

    def _protocol_error(self, proto: _Protocol, exc: Exception) -> None:
        self._drop(proto, WireError(f"protocol error: {exc}", address=self.address), "bad reply")

    def _drop(self, proto: _Protocol, error: EchoMQError, why: str) -> None:
        """Give up on ``proto``'s socket: fail its calls, and reconnect unless closed.

        The connector lets go of the socket at once, so a call issued right after sees the
        reconnect, not a socket that is about to die.
        """
        self._fail_pending(proto, error)
        if proto.transport is not None:
            proto.transport.abort()
        if proto is not self._proto:
            return
        self._proto = None
        self._wbuf.clear()
        self._waits.clear()  # their pipelines were in ``proto.pending``: failed above
        if self._closed or not self._established:
            return  # a first connect that fails is the caller's to handle, not ours to retry
        if self._ready is not None:
            self._ready.clear()
        if self._reconnect_task is not None and not self._reconnect_task.done():
            return  # a reconnect attempt is what just failed: its loop carries on
        log.warning("lost connection to %s (%s); reconnecting", self.address, why)
        self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect())

    def _fail_pending(self, proto: _Protocol, exc: EchoMQError) -> None:
        pending = proto.pending
        while pending:
            entry = pending.popleft()
            if isinstance(entry, _Gather):
                entry.fail(exc)
            elif not entry.done():
                entry.set_exception(exc)

    def _push(self, frame: list[Any]) -> None:
        if self.on_push is not None:
            self.on_push(frame)

    async def _reconnect(self) -> None:
        delay = _BACKOFF_START
        while not self._closed:
            await asyncio.sleep(delay + random.uniform(0, delay / 2))
            try:
                await self._open()
            except (AuthError, VersionFenceError) as exc:
                log.error("reconnect to %s refused for good: %s", self.address, exc)
                self._closed = True
                if self._ready is not None:
                    self._ready.set()
                return
            except EchoMQError as exc:
                log.info("reconnect to %s failed: %s", self.address, exc)
                delay = min(delay * 2, _BACKOFF_MAX)
                continue
            log.info("reconnected to %s", self.address)
            return

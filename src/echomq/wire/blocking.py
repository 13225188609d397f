"""The blocking wire under :class:`echomq.SyncQueue`: no event loop, one socket per thread.

A :class:`Link` is one blocking socket to one server: a call is one ``sendall`` of bytes packed
in advance and as many ``recv_into`` one reused buffer as the reply takes, parsed by hiredis.
A :class:`Router` (one per process) gives each thread its own links and sends each command to
the node owning its slot: a single server, or a cluster whose owners it learns from ``MOVED``
(``ASK`` is followed once behind ``ASKING``). Every command the sync producer sends is
idempotent (admission by id, reads, settings, lease steps), so a call lost with its connection
is sent once more on a new one instead of failing the caller.
"""

from __future__ import annotations

import os
import select
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Final

import hiredis

from echomq.errors import (
    ConnectError,
    Disconnected,
    ScriptLoadError,
    WireError,
    WireTimeout,
    server_error,
)
from echomq.wire.handshake import check_fence, check_handshake, handshake, tls_context
from echomq.wire.script import Script
from echomq.wire.slots import VERSION_KEY, slot
from echomq.wire.url import ConnectionOptions

_NEED_MORE: Final = object()
#: What :meth:`Link.read` answers when nothing arrived in time.
NOTHING: Final = object()
ReplyError: Final = hiredis.ReplyError
Push: Final = hiredis.PushNotification
pack: Final[Callable[[tuple[Any, ...]], bytes]] = hiredis.pack_command
_ASKING: Final = pack(("ASKING",))
_BUFFER = 64 * 1024
#: Seconds a call polls for its reply before it sleeps in ``poll`` (see :class:`Link`): a
#: little more than the enqueue script's own time, so a local server's reply is caught awake.
#: Read when a link opens (bench/sync_producer.py --no-spin sets it to 0 to compare).
SPIN = 100e-6
#: MOVED answers followed for one call; TRYAGAIN / CLUSTERDOWN are retried until the timeout.
MAX_REDIRECTS: Final = 8
_RETRY_PAUSE: Final = 0.05
#: Error replies that mean the command did not run (sent again through ``Router.call``).
_NOT_RUN: Final = frozenset({"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "NOSCRIPT"})


def _open_socket(options: ConnectionOptions) -> socket.socket:
    try:
        sock = socket.create_connection((options.host, options.port), options.connect_timeout)
    except TimeoutError:
        raise WireTimeout(
            f"connect timed out after {options.connect_timeout}s", address=options.address
        ) from None
    except OSError as exc:
        raise ConnectError(
            f"cannot connect: {exc.strerror or exc}", address=options.address
        ) from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    context = tls_context(options)
    if context is None:
        return sock
    try:
        return context.wrap_socket(sock, server_hostname=options.host)
    except (ssl.SSLError, OSError) as exc:
        sock.close()
        raise ConnectError(f"TLS handshake failed: {exc}", address=options.address) from exc


class Link:
    """One blocking connection, used by one thread at a time. A failure closes it for good:
    the router opens another.

    A plain socket is non-blocking underneath: after a send the reply is first polled for
    :data:`SPIN` seconds (yielding the core each turn), then waited for with ``poll``. On a
    virtual machine a waiting thread's idle core halts, and waking it costs tens of µs — more
    than the script itself takes — so a short spin doubles the calls per second one thread
    makes (bench/sync_producer.py). The link keeps a moving average of how long its replies
    take and spins only while that is under the spin: a distant server's round trip (hundreds
    of µs) would burn the spin for nothing. A TLS socket blocks with a timeout instead.

    :meth:`post` sends commands nobody waits for (fire-and-forget events): their replies are
    owed, and read and dropped ahead of the next reply anyone asks for.
    """

    __slots__ = (
        "__weakref__",
        "_buffer",
        "_is_tls",
        "_latency",
        "_owed",
        "_poll",
        "_reader",
        "_sock",
        "_spin",
        "_view",
        "address",
        "options",
    )

    def __init__(self, options: ConnectionOptions, *, fence: str | None) -> None:
        self.options = options
        self.address = options.address
        self._reader = hiredis.Reader(notEnoughData=_NEED_MORE)
        self._buffer = bytearray(_BUFFER)
        self._view = memoryview(self._buffer)
        self._is_tls = options.tls
        self._spin = SPIN
        self._latency = 0.0  # moving average of the seconds a reply took to arrive
        self._owed = 0  # replies to posts, not read yet
        self._sock: socket.socket | None = None  # set before a refused connect: __del__ closes
        sock = self._sock = _open_socket(options)
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        try:
            sock.settimeout(options.call_timeout if self._is_tls else 0.0)
            commands = handshake(options, fence)
            replies = self.call_many(b"".join(pack(c) for c in commands), len(commands))
            check_handshake([error_of(r) for r in replies], fence, self.address)
        except BaseException:
            self.close()
            raise

    @property
    def is_open(self) -> bool:
        return self._sock is not None

    def call(self, data: bytes) -> Any:
        """Send one packed command and return its reply (an error reply as a ``ReplyError``)."""
        reader = self._reader
        try:
            self._send(data)
            if self._owed:
                self._drop_owed()
            reply = reader.gets()
            while reply is _NEED_MORE:
                reader.feed(self._view, 0, self._fill(None, True))  # type: ignore[arg-type]
                reply = reader.gets()
        except (OSError, hiredis.ProtocolError) as exc:
            raise self._failed(exc) from None
        return reply

    def call_many(self, data: bytes, n: int) -> list[Any]:
        """Send ``n`` packed commands in one write; their ``n`` replies in order."""
        first = self.call(data)
        return [first, *(self.read() for _ in range(n - 1))]

    def send(self, data: bytes) -> None:
        """Write without reading (a subscription's replies arrive as push frames)."""
        try:
            self._send(data)
        except OSError as exc:
            raise self._failed(exc) from None

    def post(self, data: bytes, n: int) -> None:
        """Write ``n`` packed commands whose replies nobody waits for: a write, no round trip.
        Their replies (errors too) are dropped unread ahead of the next call's."""
        self.send(data)
        self._owed += n

    def _drop_owed(self) -> None:
        """Read the replies owed to posts (they come before any other) and drop them."""
        reader, latency = self._reader, self._latency
        while self._owed:
            reply = reader.gets()
            while reply is _NEED_MORE:
                reader.feed(self._view, 0, self._fill(None, True))  # type: ignore[arg-type]
                reply = reader.gets()
            self._owed -= 1
        # Usually there already: their timing would understate the round trip the spin follows.
        self._latency = latency

    def read(self, timeout: float | None = None) -> Any:
        """The next frame (a reply or a push); with ``timeout`` (seconds), :data:`NOTHING` when
        none arrived by then (the connection stays usable)."""
        reader = self._reader
        try:
            if self._owed:
                self._drop_owed()
            reply = reader.gets()
            while reply is _NEED_MORE:
                got = self._fill(timeout, False)
                if not got:
                    return NOTHING
                reader.feed(self._view, 0, got)  # type: ignore[arg-type]
                reply = reader.gets()
        except (OSError, hiredis.ProtocolError) as exc:
            raise self._failed(exc) from None
        return reply

    def _send(self, data: bytes) -> None:
        sock = self._sock
        if sock is None:
            raise ConnectionResetError("the connection was closed")
        if self._is_tls:
            sock.sendall(data)
            return
        try:
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        rest = memoryview(data)[sent:]
        while rest:  # the send buffer is full (a long pipeline): wait until it drains
            _, writable, _ = select.select([], [sock], [], self.options.call_timeout)
            if not writable:
                raise TimeoutError("the server stopped reading")
            try:
                rest = rest[sock.send(rest) :]
            except BlockingIOError:
                continue

    def _fill(self, timeout: float | None, spin: bool) -> int:
        """Read what arrived into the buffer: its length; 0 when ``timeout`` (seconds) passed
        first. Without ``timeout`` the call timeout applies and passing it raises."""
        sock = self._sock
        if sock is None:
            raise ConnectionResetError("the connection was closed")
        limit = self.options.call_timeout if timeout is None else max(timeout, 0.0)
        if self._is_tls:  # blocks with the call timeout, set once; a wait's own for its read
            if timeout is not None:
                sock.settimeout(max(limit, 0.001))
            try:
                got = sock.recv_into(self._buffer)
            except TimeoutError:
                if timeout is None:
                    raise
                return 0
            finally:
                if timeout is not None:
                    sock.settimeout(self.options.call_timeout)
        else:
            got = self._poll_and_read(sock, limit, timeout, spin)
            if got < 0:
                return 0  # nothing within the wait's own timeout
        if not got:
            raise ConnectionResetError("closed by the server")
        return got

    def _poll_and_read(
        self, sock: socket.socket, limit: float, timeout: float | None, spin: bool
    ) -> int:
        """A non-blocking socket's next bytes: their length (0 at EOF), or -1 when ``timeout``
        passed first (without ``timeout``, passing the call timeout raises). ``poll(0)`` asks
        without the cost of an exception per empty read."""
        poll = self._poll.poll
        started = time.perf_counter()
        while True:
            ready = poll(0)
            if not ready and spin and self._latency < self._spin:
                until = started + self._spin
                while not ready and time.perf_counter() < until:
                    os.sched_yield()  # a server sharing this core runs now
                    ready = poll(0)
            if not ready and not poll(limit * 1000):
                if timeout is None:
                    raise TimeoutError
                return -1
            got = _recv_now(sock, self._buffer)
            if got >= 0:
                break
        if spin:
            self._latency += (time.perf_counter() - started - self._latency) / 8
        return got

    def is_idle_and_sound(self) -> bool:
        """Whether nothing waits to be read (a reply, an EOF) on this link with no call in flight:
        a link the server closed while it sat idle shows as readable and is closed here."""
        if self._sock is None:
            return False
        if self._owed:  # what waits to be read may be those replies: read them first
            try:
                self._drop_owed()
            except (OSError, hiredis.ProtocolError):
                self.close()
                return False
        if self._poll.poll(0):
            self.close()
            return False
        return True

    def _failed(self, exc: BaseException) -> WireError:
        self.close()
        if isinstance(exc, TimeoutError):
            return WireTimeout(
                f"no reply within {self.options.call_timeout}s", address=self.address
            )
        if isinstance(exc, hiredis.ProtocolError):
            return WireError(f"protocol error: {exc}", address=self.address)
        return Disconnected(
            f"connection lost ({exc}); the call may or may not have run", address=self.address
        )

    def close(self) -> None:
        """Close the socket. In a forked child this only lets go of the inherited descriptor:
        the parent's connection is untouched (nothing is sent, no TLS close_notify)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __del__(self) -> None:
        self.close()


def error_of(reply: Any) -> Any:
    """A reply with an error reply turned into its typed :class:`ServerError`."""
    return server_error(str(reply)) if type(reply) is ReplyError else reply


def _recv_now(sock: socket.socket, buffer: bytearray) -> int:
    """What a non-blocking socket holds now: its length, 0 at EOF, -1 when nothing arrived."""
    try:
        return sock.recv_into(buffer)
    except BlockingIOError:
        return -1


class _Links(threading.local):
    """One thread's links, by address."""

    def __init__(self) -> None:
        self.by_address: dict[str, Link] = {}


class Router:
    """The wire of one process: every thread's links, and the slot owners learnt so far.

    Made again in a forked child (see :attr:`pid`): nothing of the parent's is written to.
    """

    def __init__(self, seeds: Sequence[ConnectionOptions], fence: str | None) -> None:
        self.seeds = list(seeds)
        self.seed = self.seeds[0]
        self.fence = fence
        self.pid = os.getpid()
        self.is_cluster = len(self.seeds) > 1
        self.owners: dict[int, str] = {}  # slot → address, learnt from MOVED
        self.moved = 0
        self.ask = 0
        self.reconnects = 0
        self._local = _Links()
        self._every: weakref.WeakSet[Link] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False
        self._fences_links = False  # known once start() asked the server

    def start(self) -> None:
        """Learn whether the seed is a cluster node, and check the version fence once."""
        info = self.call(None, pack(("INFO", "cluster")))
        if isinstance(info, bytes) and b"cluster_enabled:1" in info:
            self.is_cluster = True
        if self.fence is not None:
            found = self.call(
                slot(VERSION_KEY), pack(("SET", VERSION_KEY, self.fence, "NX", "GET"))
            )
            check_fence(error_of(found), self.fence, self.seed.address)
        # On one server every later link runs the fence in its handshake, as the async
        # connector does; a cluster's fence key lives on one node, checked above.
        self._fences_links = not self.is_cluster

    def address(self, key_slot: int | None) -> str:
        if key_slot is None:
            return self.seed.address
        return self.owners.get(key_slot, self.seed.address)

    def options_for(self, address: str) -> ConnectionOptions:
        for seed in self.seeds:
            if seed.address == address:
                return seed
        host, _, port = address.rpartition(":")
        return self.seed.replace(host=host.strip("[]"), port=int(port))

    def link(self, address: str) -> Link:
        """This thread's link to ``address``, opened (with the handshake) when it has none."""
        links = self._local.by_address
        link = links.get(address)
        if link is not None and link.is_open:
            return link
        if self._closed:
            raise ConnectError("the sync queue is closed", address=address)
        link = Link(self.options_for(address), fence=self.fence if self._fences_links else None)
        if address in links:
            self.reconnects += 1
        links[address] = link
        with self._lock:
            self._every.add(link)
        return link

    def dedicated(self, key_slot: int | None, role: str, address: str | None = None) -> Link:
        """A link of the caller's own (a subscription), not shared with the thread's calls, to
        the owner of ``key_slot`` (or to ``address``); ``CLIENT LIST`` names it after the
        client name and ``role`` (``echomq-wait``)."""
        options = self.options_for(address or self.address(key_slot))
        name = f"{options.client_name or 'echomq'}-{role}"
        return Link(options.replace(client_name=name), fence=None)

    def call(self, key_slot: int | None, data: bytes, script: Script | None = None) -> Any:
        """Send one packed command to the owner of ``key_slot``; its reply (an error reply as a
        ``ReplyError``). Follows redirections, loads ``script`` on ``NOSCRIPT``, and sends a
        call lost with its connection once more on a new one."""
        address = self.address(key_slot)
        asking = False
        replayed = loaded = False
        moved = 0
        deadline = 0.0
        while True:
            try:
                link = self.link(address)
                reply = link.call_many(_ASKING + data, 2)[1] if asking else link.call(data)
            except (Disconnected, ConnectError):
                if replayed and not self.is_cluster:
                    raise
                if replayed:  # a cluster: the node may be gone; ask a seed who owns it now
                    deadline = deadline or time.monotonic() + self.seed.call_timeout
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(_RETRY_PAUSE)
                    address = self.next_seed(address)
                    asking = False
                    continue
                replayed = True
                continue
            if type(reply) is not ReplyError:
                return reply
            message = str(reply)
            code = message.split(" ", 1)[0]
            if code == "MOVED" and moved < MAX_REDIRECTS:
                moved += 1
                self.moved += 1
                _, moved_slot, address = message.split()
                self.owners[int(moved_slot)] = address
                self.is_cluster = True
                asking = False
                continue
            if code == "ASK" and not asking:
                self.ask += 1
                address, asking = message.split()[2], True
                continue
            if code in ("TRYAGAIN", "CLUSTERDOWN"):
                deadline = deadline or time.monotonic() + self.seed.call_timeout
                if time.monotonic() < deadline:
                    time.sleep(_RETRY_PAUSE)
                    asking = False
                    address = self.address(key_slot)
                    continue
            if code == "NOSCRIPT" and script is not None and not loaded:
                loaded = True
                self._load(link, script)
                continue
            return reply

    def post(self, key_slot: int | None, data: bytes, n: int) -> None:
        """Send ``n`` packed commands to the owner of ``key_slot`` on this thread's link without
        waiting for their replies (see :meth:`Link.post`): at most once, never sent again. A
        refusal (a slot that moved) is dropped with the reply."""
        self.link(self.address(key_slot)).post(data, n)

    def call_each(
        self,
        key_slot: int | None,
        commands: Sequence[bytes],
        script: Script | None = None,
        window: int = 16,
    ) -> list[Any]:
        """Send many packed calls (of ``script``, if any) to the owner of ``key_slot``, at most
        ``window`` in flight; one reply per command, in order. A call answered with a
        redirection or ``NOSCRIPT`` (it did not run) goes again alone through :meth:`call`;
        when the connection drops, the place of each call not answered holds that error (it
        may or may not have run: never replayed here)."""
        return self.call_spread([(key_slot, command) for command in commands], script, window)

    def call_spread(
        self,
        calls: Sequence[tuple[int | None, bytes]],
        script: Script | None = None,
        window: int = 16,
    ) -> list[Any]:
        """:meth:`call_each` for ``(slot, packed call)`` pairs of several slots: the calls to
        one owner pipelined on this thread's link to it, at most ``window`` in flight, every
        owner's first window sent before any reply is read (so slots sharing a server cost one
        round trip, and the owners' round trips overlap); one reply per call, in order."""
        groups: dict[str, list[int]] = {}
        for i, (key_slot, _) in enumerate(calls):
            groups.setdefault(self.address(key_slot), []).append(i)
        replies: list[Any] = [None] * len(calls)
        flights: list[tuple[Link, list[int], int]] = []
        for address, positions in groups.items():
            try:
                link = self.link(address)
                if not link.is_idle_and_sound():  # closed by the server while idle: none sent
                    link = self.link(address)
                sent = min(window, len(positions))
                link.send(b"".join(calls[i][1] for i in positions[:sent]))
            except WireError as exc:
                for i in positions:
                    replies[i] = exc
                continue
            flights.append((link, positions, sent))
        for link, positions, sent in flights:
            read = 0
            try:
                while read < len(positions):
                    replies[positions[read]] = link.read()
                    read += 1
                    if sent < len(positions):
                        link.send(calls[positions[sent]][1])
                        sent += 1
            except WireError as exc:
                for i in positions[read:]:
                    replies[i] = exc
        for i, reply in enumerate(replies):
            if type(reply) is ReplyError and str(reply).split(" ", 1)[0] in _NOT_RUN:
                key_slot, data = calls[i]
                try:
                    replies[i] = self.call(key_slot, data, script)
                except WireError as exc:
                    replies[i] = exc
        return replies

    def next_seed(self, failed: str) -> str:
        """Where to ask after ``failed`` stopped answering: the next seed (it answers MOVED)."""
        for owner_slot in [s for s, a in self.owners.items() if a == failed]:
            del self.owners[owner_slot]
        addresses = [seed.address for seed in self.seeds]
        if failed in addresses:
            return addresses[(addresses.index(failed) + 1) % len(addresses)]
        return addresses[0]

    @staticmethod
    def _load(link: Link, script: Script) -> None:
        got = link.call(pack(("SCRIPT", "LOAD", script.source)))
        sha = got.decode() if isinstance(got, bytes) else str(got)
        if sha != script.sha:
            raise ScriptLoadError(script.name, script.sha, sha)

    def close(self) -> None:
        """Close every thread's links."""
        self._closed = True
        with self._lock:
            links = list(self._every)
            self._every.clear()
        for link in links:
            link.close()

    def abandon(self) -> None:
        """In a forked child: let go of the parent's descriptors without writing on them, and
        without the lock (a parent thread may have held it at the fork)."""
        self._closed = True
        for link in list(self._every):
            link.close()

"""The one exception tree of echomq, and the table that maps engine refusals to it.

    EchoMQError
    ├── InvalidArgument        (also ValueError) a bad name, id, delay, lease … before any I/O
    │   └── CrossSlotError     a command's keys span cluster slots (refused before any I/O)
    ├── WireError              the connection: carries the server address
    │   ├── ConnectError       nothing listening, DNS, TLS handshake, refused
    │   ├── AuthError          wrong user/password (the server refused AUTH/HELLO)
    │   ├── WireTimeout        (also TimeoutError) connect or call exceeded its timeout
    │   ├── Disconnected       the socket dropped with the call in flight (never replayed)
    │   ├── Closed             the connector was closed by its owner
    │   └── Overloaded         too many calls in flight on one connector
    ├── VersionFenceError      `{emq}:version` holds another wire version
    ├── NodeLeaseError         no id node could be leased, or the lease lapsed: nothing minted
    ├── ScriptLoadError        SCRIPT LOAD returned an unexpected sha
    ├── TaskFailed             a task's job is dead: carries its error and traceback
    ├── TaskCancelled          a task's job was cancelled: carries the cancel's reason
    ├── ResultTimeout          (also TimeoutError) no result within the wait's timeout
    ├── ResultMissing          the job has no row: never admitted, or its kept result expired
    ├── HookFailed             an App's startup hook raised: the worker does not start
    ├── NotDurable             WAITAOF confirmed fewer fsyncs than a Durability asked: the
    │                          write happened, it may not survive a crash (send it again)
    ├── DurabilityUnavailable  the server cannot give the asked durability (appendonly off)
    └── ServerError            an error reply from the server (message kept verbatim)
        └── Refusal            a typed `EMQ<CLASS> detail` refusal from a script
            ├── KindError      EMQKIND  (an id of the wrong namespace)
            ├── StaleTokenError EMQSTALE (the fencing token moved on)
            ├── RateError      EMQRATE  (a ceiling or rate budget refused)
            ├── LockedError    EMQLOCK  (the job is held by a worker)
            ├── StateError     EMQSTATE (the job or queue is in the wrong state)
            │   └── PlacementBusy  another lane move or grow of the sharded queue runs
            ├── ArgumentRefused EMQARG  (a script refused an argument before writing anything)
            ├── LaneFull       EMQFULL  (the lane holds its backlog cap: nothing written)
            ├── LaneHeld       EMQHELD  (an item of a lane held for a move: look at the
            │                           source's keys and ids first; the sharded producers do)
            ├── LaneMoved      EMQMOVED (a shard of a sharded queue does not serve the lane)
            └── QueueSharded   EMQSHARDED (a plain queue on a sharded queue's name; also
                               Unsupported: open it with connect_queue)

Normal outcomes (duplicate, empty, rate-limited) are return values, never exceptions. A refusal
of one item of a batch is that item's verdict (``error``; ``rejected`` for a full lane or a lane
another shard serves) instead.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

__all__ = [
    "ArgumentRefused",
    "AuthError",
    "Closed",
    "ConnectError",
    "CrossSlotError",
    "Disconnected",
    "DurabilityUnavailable",
    "EchoMQError",
    "HookFailed",
    "InvalidArgument",
    "KindError",
    "LaneFull",
    "LaneHeld",
    "LaneMoved",
    "LockedError",
    "NodeLeaseError",
    "NotDurable",
    "Overloaded",
    "PlacementBusy",
    "QueueSharded",
    "RateError",
    "Refusal",
    "ResultMissing",
    "ResultTimeout",
    "ScriptLoadError",
    "ServerError",
    "StaleTokenError",
    "StateError",
    "TaskCancelled",
    "TaskFailed",
    "Unsupported",
    "VersionFenceError",
    "WireError",
    "WireTimeout",
]


class EchoMQError(Exception):
    """Root of every error echomq raises."""


class InvalidArgument(EchoMQError, ValueError):
    """An argument was refused before any wire traffic; nothing was written."""

    def __init__(self, argument: str, value: Any, reason: str) -> None:
        self.argument = argument
        self.value = value
        self.reason = reason
        super().__init__(f"invalid {argument} {shown(value)}: {reason}")


class Unsupported(EchoMQError, NotImplementedError):
    """A verb this kind of queue does not offer yet (changing a sharded queue's shard count in
    place, say); the message names it and where it is planned. Nothing was written."""


def shown(value: Any, width: int | None = None) -> str:
    """``repr(value)`` for a message, cut to ``width`` characters when given; a value whose repr
    fails (nested past the interpreter's recursion limit, a broken ``__repr__``) is shown by
    its type, so building a refusal never raises in its place."""
    try:
        text = repr(value)
    except RecursionError:
        text = f"<{type(value).__name__} nested too deeply to show>"
    except Exception:  # a user's __repr__ that raises: the refusal still says what it refused
        text = f"<{type(value).__name__} whose repr failed>"
    return text if width is None or len(text) <= width else text[: width - 3] + "..."


class CrossSlotError(InvalidArgument):
    """A command's keys hash to different cluster slots; it was not sent anywhere."""

    def __init__(self, command: str, slots: dict[str, int]) -> None:
        self.slots = slots
        listed = ", ".join(f"{key!r} -> {slot}" for key, slot in slots.items())
        super().__init__(
            "keys",
            list(slots),
            f"{command} needs all its keys in one cluster slot (share a {{tag}}): {listed}",
        )


class WireError(EchoMQError):
    """A failure of the connection to the server at ``address``."""

    def __init__(self, message: str, *, address: str = "") -> None:
        self.address = address
        super().__init__(f"{message} ({address})" if address else message)


class ConnectError(WireError):
    """The server could not be reached (refused, unreachable, TLS handshake failed)."""


class AuthError(WireError):
    """The server refused the credentials."""


class WireTimeout(WireError, TimeoutError):
    """A connect or a call did not finish within its timeout."""


class Disconnected(WireError):
    """The socket dropped while the call was in flight. The call may or may not have run."""


class Closed(WireError):
    """The connector was closed; no further calls are accepted."""


class Overloaded(WireError):
    """Too many calls are in flight on one connector."""


class VersionFenceError(EchoMQError):
    """The deployment's ``{emq}:version`` does not match this library's wire version."""

    def __init__(self, expected: str, found: str, *, address: str = "") -> None:
        self.expected = expected
        self.found = found
        self.address = address
        super().__init__(
            f"version fence: {{emq}}:version on {address or 'the server'} is {found!r}, "
            f"this library speaks {expected!r}; refusing to connect"
        )


class NodeLeaseError(EchoMQError):
    """A leased :class:`~echomq.engine.Minter` cannot mint: its node lease lapsed (the engine could
    not be reached to renew it in time), was never taken, or every node is leased."""


class ScriptLoadError(EchoMQError):
    """SCRIPT LOAD answered a sha that differs from the one computed from the source."""

    def __init__(self, name: str, expected: str, got: str) -> None:
        self.name = name
        self.expected = expected
        self.got = got
        super().__init__(f"script {name}: SCRIPT LOAD returned sha {got}, expected {expected}")


class ServerError(EchoMQError):
    """An error reply from the server. ``code`` is its first word (``ERR``, ``WRONGTYPE``, …)."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.code = message.split(" ", 1)[0]
        super().__init__(message)


class Refusal(ServerError):
    """A typed refusal ``EMQ<CLASS> detail`` from one of the engine's scripts."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.detail = message.split(" ", 1)[1] if " " in message else ""


class KindError(Refusal):
    """EMQKIND: an id of the wrong namespace (only ``JOB`` ids are admitted)."""


class StaleTokenError(Refusal):
    """EMQSTALE: the fencing token no longer matches the job row (or, from quota.lua, a quota
    move carries a rebalancer token older than one the shard has seen)."""


class RateError(Refusal):
    """EMQRATE: a concurrency ceiling or rate budget refused the call."""


class LockedError(Refusal):
    """EMQLOCK: the job is held by a worker."""


class StateError(Refusal):
    """EMQSTATE: the job or queue is in the wrong state for this call."""


class PlacementBusy(StateError):
    """EMQSTATE: another lane move or grow of the sharded queue ``queue`` holds its placement
    lease (docs/concepts/shards.md, "Changing S"); nothing was written. ``holder`` names it (what
    it does, its host and process), ``expires_in`` the seconds its lease lasts unless extended:
    a holder that died lets it expire, and the next move or grow resumes its work. Call again
    once it is done (a grow called again finds nothing left, or finishes what it left)."""

    def __init__(self, queue: str, holder: str, expires_in: float) -> None:
        self.queue = queue
        self.holder = holder
        self.expires_in = expires_in
        super().__init__(
            f"EMQSTATE placement of {queue!r} is leased by {holder} ({expires_in:.1f} s left "
            "unless extended): one lane move or grow at a time, call again once it is done"
        )


class ArgumentRefused(Refusal):
    """EMQARG: a script refused an argument out of bounds before its first write.

    The host-side checks refuse the same bounds first (as :class:`InvalidArgument`), so this
    reaches a caller only through a raw script call. ``argument`` names the argument.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.argument = self.detail.split(" ", 1)[0]


class LaneFull(Refusal):
    """EMQFULL: the job's lane holds as many unfinished jobs (pending, leased and scheduled) as
    its backlog cap (a :class:`~echomq.Policy`'s ``cap``, ``lane.cap()``); nothing was written.

    Raised by a single enqueue; in a batch it is the ``rejected`` item's ``verdict.error``.
    ``lane`` is the lane, ``cap`` its cap, ``backlog`` the unfinished jobs it held; ``reason``
    is ``"lane full"``. The cap frees up as the lane's jobs finish: send it again later, with
    the same id if it had one."""

    reason = "lane full"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        found = _FULL.match(self.detail)
        self.backlog = int(found[1]) if found else 0
        self.cap = int(found[2]) if found else 0
        self.lane = found[3] if found else ""


_FULL = re.compile(r"lane full: (\d+) unfinished jobs, cap (\d+), lane (.*)\Z", re.DOTALL)


class LaneMoved(Refusal):
    """EMQMOVED: a shard of a sharded queue refused an item of a lane it does not serve
    (docs/concepts/shards.md, "The fence"); nothing of the item was written.

    ``shard`` is the shard the lane moved to when this shard knows it (its ``moved`` names it),
    else None: the producer's slot table is stale, read the directory again. ``epoch`` is the
    refusing shard's placement epoch and ``sent`` the producer's: ``epoch > sent`` says the
    producer's map is older than the shard's. ``lane`` is the lane; ``reason`` is
    ``"lane moved"``. In a batch it is the ``rejected`` item's ``verdict.error``: send the item
    to the shard that serves its lane, with the same id."""

    reason = "lane moved"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        found = _MOVED.match(self.detail)
        self.shard = int(found[1]) if found and found[1] != "?" else None
        self.epoch = int(found[2]) if found else 0
        self.sent = int(found[3]) if found else 0
        self.lane = found[4] if found else ""


class LaneHeld(Refusal):
    """EMQHELD: a shard of a sharded queue holds the item's lane for a move (it admits the lane,
    serving it once the move ends) and neither the item's dedup key nor its id, which may
    still name a job on the lane's source, not copied yet (docs/concepts/shards.md, "Dedup
    while a lane is held"); nothing of the item was written. ``shard`` is that source,
    ``lane`` the lane. The sharded producers answer it themselves: the key and the id read on
    the source, the item answered as that job's duplicate, or sent again to this shard with
    them checked."""

    reason = "lane held"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        found = _HELD.match(self.detail)
        self.shard = int(found[1]) if found else 0
        self.lane = found[2] if found else ""


_HELD = re.compile(r"(\d+): lane (.*)\Z", re.DOTALL)
_MOVED = re.compile(r"(\d+|\?) epoch (\d+), sent at (\d+): lane (.*)\Z", re.DOTALL)


class QueueSharded(Refusal, Unsupported):
    """EMQSHARDED: a plain :class:`~echomq.Queue` (or ``SyncQueue``) on the name of a sharded
    queue, refused before any write. It would be the queue's shard 0 alone, with no fence: it
    would admit a lane another shard serves (the lane then runs on two shards) and claim shard
    0 alone. ``Queue.connect`` refuses at connect (one read of the directory); a
    ``Queue(name, wire)`` built by hand, one opened before the queue was sharded, or a
    ``SyncQueue``, is refused by the engine at its first enqueue, ``enqueue_many`` or claim
    (and a ``Queue`` by one read of the directory at its first ``add_flow`` or ``reassign``).
    Open the queue by name with ``echomq.engine.connect_queue`` (``open_queue``;
    ``connect_sync_queue``, blocking), or with ``ShardedQueue.connect(url, name, shards=S)``
    (docs/concepts/shards.md). ``queue`` is its name, ``shards`` its shard count (None when
    unknown), ``shard`` the shard refusing (0)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        found = _SHARDED.match(self.detail)
        self.queue = found[1] if found else ""
        self.shards = int(found[2]) if found and found[2] != "?" else None
        self.shard = int(found[3]) if found else 0

    @classmethod
    def of(cls, queue: str, shards: int | None) -> QueueSharded:
        """The refusal the engine sends (unfenced in _shard.lua), made host-side: a connect
        that found the directory."""
        return cls(
            f"EMQSHARDED queue {queue} is sharded over {'?' if shards is None else shards} "
            "shards (this is its shard 0): open it with connect_queue(url, name) or "
            "ShardedQueue.connect(url, name, shards=S)"
        )


_SHARDED = re.compile(r"queue (\S+) is sharded over (\d+|\?) shards \(this is its shard (\d+)\)")


class TaskFailed(EchoMQError):
    """The task's job is dead: ``error`` is its ``last_error``, ``traceback`` the last failed
    attempt's (when one was kept)."""

    def __init__(self, id: str, task: str, error: str, traceback: str | None = None) -> None:
        self.id = id
        self.task = task
        self.error = error
        self.traceback = traceback
        super().__init__(f"task {task} (job {id}) failed: {error}")


class TaskCancelled(EchoMQError):
    """The task's job was cancelled (``Queue.cancel``, a handle's ``cancel()``): ``reason`` is
    the one the cancel gave ("" for none). Nothing runs it again."""

    def __init__(self, id: str, task: str, reason: str = "") -> None:
        self.id = id
        self.task = task
        self.reason = reason
        why = f": {reason}" if reason else ""
        super().__init__(f"task {task} (job {id}) was cancelled{why}")


class ResultTimeout(EchoMQError, TimeoutError):
    """The job did not finish within ``timeout`` seconds; it may still run later."""

    def __init__(self, id: str, timeout: float | None, state: str) -> None:
        self.id = id
        self.timeout = timeout
        self.state = state
        super().__init__(f"job {id} is still {state} after {timeout} s")


class ResultMissing(EchoMQError):
    """The job has no row: it was never admitted, or it completed and its result was not kept
    (``result_ttl`` 0) or has expired."""

    def __init__(self, id: str) -> None:
        self.id = id
        super().__init__(f"job {id} has no row: never admitted, or its result was not kept")


class HookFailed(EchoMQError):
    """A startup hook of an App raised, so its worker did not start (``error`` is the cause)."""

    def __init__(self, hook: str, error: BaseException) -> None:
        self.hook = hook
        self.error = error
        super().__init__(f"startup hook {hook} failed: {type(error).__name__}: {error}")


class NotDurable(EchoMQError):
    """``WAITAOF`` confirmed fewer fsyncs than the queue's :class:`~echomq.engine.Durability` asks,
    within its timeout, or could not answer (``reason``).

    Raised (or, for a batch, put in each written item's place) *after* the writes happened:
    they are in the server's memory and may or may not survive a crash. Admission is
    idempotent by id, so send the same jobs again with the same ``ids``.
    ``asked`` and ``got`` are ``(local fsyncs, replica fsyncs)``.
    """

    def __init__(
        self,
        ids: tuple[str, ...],
        asked: tuple[int, int],
        got: tuple[int, int],
        timeout: float,
        reason: str = "",
    ) -> None:
        self.ids = ids
        self.asked = asked
        self.got = got
        self.timeout = timeout
        self.reason = reason
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"WAITAOF confirmed {got[0]}/{asked[0]} local and {got[1]}/{asked[1]} replica "
            f"fsyncs within {timeout:g} s for {len(ids)} job(s){why}: the write happened but "
            "may not survive a crash; send it again with the same id (admission is idempotent)"
        )


class DurabilityUnavailable(EchoMQError):
    """The server at ``address`` cannot confirm the durability asked: a local fsync needs
    ``appendonly yes`` (``WAITAOF`` refuses otherwise). ``reason`` says what was missing."""

    def __init__(self, reason: str, *, address: str = "") -> None:
        self.reason = reason
        self.address = address
        where = f" on {address}" if address else ""
        super().__init__(f"durability unavailable{where}: {reason}")


#: The closed table of refusal classes; grown only additively.
REFUSALS: dict[str, type[Refusal]] = {
    "EMQKIND": KindError,
    "EMQSTALE": StaleTokenError,
    "EMQRATE": RateError,
    "EMQLOCK": LockedError,
    "EMQSTATE": StateError,
    "EMQARG": ArgumentRefused,
    "EMQFULL": LaneFull,
    "EMQMOVED": LaneMoved,
    "EMQHELD": LaneHeld,
    "EMQSHARDED": QueueSharded,
}


def server_error(message: str) -> ServerError:
    """Map an error reply to its exception: a typed refusal for ``EMQ*``, else ``ServerError``.

    Inside a script the server prefixes errors raised with ``redis.error_reply`` unchanged, but
    errors thrown by ``error()`` gain a ``user_script:…`` prefix; both forms are recognised.
    """
    code = message.split(" ", 1)[0]
    cls = REFUSALS.get(code)
    if cls is not None:
        return cls(message)
    if code.startswith("EMQ"):
        return Refusal(message)
    return ServerError(message)


def renamed(old: str, new: str) -> None:
    """Warn that ``old`` is the deprecated name of ``new`` (a ``DeprecationWarning`` pointing at
    the caller's caller: the line that used the old name)."""
    warnings.warn(
        f"{old} is deprecated: the word is {new} ({old} goes in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )

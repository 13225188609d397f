"""Branded ids: a 3-letter namespace plus an 11-character Base62 snowflake, 14 ASCII bytes.

Owns the encoding (byte order equals numeric order equals mint order), validation with a reason
for every refusal, and the monotonic ``Minter`` that producers use to mint ids host-side.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from echomq.errors import InvalidArgument, NodeLeaseError

if TYPE_CHECKING:
    from echomq.engine.nodes import NodeLease
    from echomq.wire.pool import Wire

#: Milliseconds since the Unix epoch of 2024-01-01T00:00:00Z, the snowflake's zero.
EPOCH_MS: Final = 1_704_067_200_000
#: The largest valid payload number (63 bits); its Base62 form is ``AzL8n0Y58m7``.
MAX_NUMBER: Final = (1 << 63) - 1
#: Every branded id is exactly this many ASCII bytes: namespace (3) + payload (11).
LENGTH: Final = 14

NAMESPACE_LENGTH: Final = 3
PAYLOAD_LENGTH: Final = 11
TS_SHIFT: Final = 22
NODE_SHIFT: Final = 12
MAX_NODE: Final = (1 << 10) - 1
MAX_SEQ: Final = (1 << 12) - 1
MAX_TS: Final = (1 << 41) - 1

ALPHABET: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# Immutable lookup tables built once at import: encoding and decoding work two characters at a
# time, which keeps both down to a handful of divmods / dict hits on the enqueue hot path.
_PAIRS: Final[tuple[str, ...]] = tuple(a + b for a in ALPHABET for b in ALPHABET)
_PAIR_VALUE: Final[dict[str, int]] = {pair: i for i, pair in enumerate(_PAIRS)}
_CHAR_VALUE: Final[dict[str, int]] = {c: i for i, c in enumerate(ALPHABET)}
_UPPER: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _is_namespace(namespace: str) -> bool:
    return (
        len(namespace) == NAMESPACE_LENGTH
        and namespace[0] in _UPPER
        and namespace[1] in _UPPER
        and namespace[2] in _UPPER
    )


def _encode_payload(n: int) -> str:
    # 3844 == 62 * 62: two characters per divmod; literals and locals keep global lookups out.
    pairs = _PAIRS
    n, p5 = divmod(n, 3844)
    n, p4 = divmod(n, 3844)
    n, p3 = divmod(n, 3844)
    n, p2 = divmod(n, 3844)
    n, p1 = divmod(n, 3844)
    return ALPHABET[n] + pairs[p1] + pairs[p2] + pairs[p3] + pairs[p4] + pairs[p5]


def _decode_payload(s: str) -> int:
    """Decode 11 Base62 characters; raises ``KeyError`` on a character outside the alphabet."""
    pv = _PAIR_VALUE
    n = _CHAR_VALUE[s[0]] * 3844 + pv[s[1:3]]
    n = n * 3844 + pv[s[3:5]]
    n = n * 3844 + pv[s[5:7]]
    n = n * 3844 + pv[s[7:9]]
    return n * 3844 + pv[s[9:11]]


_NAMESPACE_RULE: Final = "must be 3 uppercase ASCII letters A-Z"


def encode(namespace: str, n: int) -> str:
    """The branded id of number ``n`` (0 ≤ n ≤ 2^63−1) in ``namespace`` (3 letters A–Z)."""
    if not isinstance(namespace, str) or not _is_namespace(namespace):
        raise InvalidArgument("namespace", namespace, _NAMESPACE_RULE)
    if type(n) is not int or not 0 <= n <= MAX_NUMBER:
        raise InvalidArgument("number", n, "must be an int in [0, 2**63 - 1]")
    return namespace + _encode_payload(n)


def _refusal(value: Any) -> str | None:
    """Why ``value`` is not a branded id, or ``None`` when it is one."""
    if not isinstance(value, str):
        return f"must be a str, got {type(value).__name__}"
    if len(value) != LENGTH:
        return f"must be exactly {LENGTH} characters, got {len(value)}"
    namespace = value[:NAMESPACE_LENGTH]
    if not _is_namespace(namespace):
        return f"namespace {namespace!r} {_NAMESPACE_RULE}"
    payload = value[NAMESPACE_LENGTH:]
    for position, char in enumerate(payload, start=NAMESPACE_LENGTH):
        if char not in _CHAR_VALUE:
            return f"character {char!r} at position {position} is not Base62 (0-9A-Za-z)"
    if _decode_payload(payload) > MAX_NUMBER:
        return f"payload {payload!r} exceeds 2**63 - 1 (largest is {_encode_payload(MAX_NUMBER)!r})"
    return None


def parse(id: str) -> tuple[str, int]:
    """Split a branded id into ``(namespace, number)``; raises ``InvalidArgument`` if malformed."""
    if isinstance(id, str) and len(id) == LENGTH:
        namespace = id[:NAMESPACE_LENGTH]
        if _is_namespace(namespace):
            try:
                n = _decode_payload(id[NAMESPACE_LENGTH:])
            except KeyError:
                pass
            else:
                if n <= MAX_NUMBER:
                    return namespace, n
    raise InvalidArgument("id", id, _refusal(id) or "malformed")


def is_valid(id: object) -> bool:
    """Whether ``id`` is a well-formed branded id (any namespace)."""
    if not isinstance(id, str) or len(id) != LENGTH or not _is_namespace(id[:NAMESPACE_LENGTH]):
        return False
    try:
        return _decode_payload(id[NAMESPACE_LENGTH:]) <= MAX_NUMBER
    except KeyError:
        return False


def validate(id: object, namespace: str | None = None, argument: str = "id") -> str:
    """Return ``id`` if it is a well-formed branded id (of ``namespace``, when given).

    Raises ``InvalidArgument`` naming ``argument`` and the reason: wrong length, bad namespace,
    a character outside Base62, a payload beyond 2^63−1, or another namespace than required.
    """
    if not (isinstance(id, str) and is_valid(id)):
        raise InvalidArgument(argument, id, _refusal(id) or "malformed")
    if namespace is not None and id[:NAMESPACE_LENGTH] != namespace:
        raise InvalidArgument(
            argument, id, f"namespace {id[:NAMESPACE_LENGTH]!r} is not the required {namespace!r}"
        )
    return id


def unix_ms(id: str) -> int:
    """The Unix time in milliseconds at which ``id`` was minted."""
    return (parse(id)[1] >> TS_SHIFT) + EPOCH_MS


def min_for(unix_ms: int) -> int:
    """The smallest number minted at or after ``unix_ms``, for time-range scans over ids.

    Instants before the epoch clamp to 0 (every id qualifies); instants past the 41-bit timestamp
    range are refused, since no id can be minted there.
    """
    ts = unix_ms - EPOCH_MS
    if ts > MAX_TS:
        raise InvalidArgument("unix_ms", unix_ms, "is beyond the 41-bit snowflake timestamp range")
    return max(ts, 0) << TS_SHIFT


def hash32(n: int) -> int:
    """32-bit hash of a number: the first half of MurmurHash3's fmix64, low 32 bits."""
    h = n & 0xFFFF_FFFF_FFFF_FFFF
    h ^= h >> 33
    h = (h * 0xFF51_AFD7_ED55_8CCD) & 0xFFFF_FFFF_FFFF_FFFF
    h ^= h >> 33
    return h & 0xFFFF_FFFF


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Minter:
    """Mints strictly increasing ids for one node; safe to share between threads.

    Keeps one logical cell ``ts << 12 | seq`` and advances it to ``max(now << 12, last + 1)``:
    within one ms ``seq`` increments, a 4096th mint in the same ms carries into ``ts``, and a
    clock that steps back keeps minting from the logical clock, so it never duplicates or blocks.

    Two kinds: ``Minter(node)`` mints as an explicit node (you promise no other live process
    uses it); ``Minter.leased(wire)`` leases its node from the engine, so every live process on
    one deployment mints as a node of its own, with no configuration (docs/reference/bounds.md,
    "Ids").
    """

    __slots__ = ("_ceiling", "_clock", "_last", "_lock", "_valid_until", "lease", "node")

    def __init__(self, node: int = 0, clock: Callable[[], int] | None = None) -> None:
        """``node`` is 0..1023; ``clock`` returns Unix ms (the wall clock when omitted)."""
        if type(node) is not int or not 0 <= node <= MAX_NODE:
            raise InvalidArgument("node", node, f"must be an int in [0, {MAX_NODE}]")
        self.node = node
        self._clock = clock if clock is not None else _wall_clock_ms
        self._last = -1
        self._lock = threading.Lock()
        # An explicit node is always valid; a leased one only until its lease's safe end
        # (monotonic seconds) and up to its ceiling (an id timestamp, ms since the epoch).
        self._valid_until = math.inf
        self._ceiling: float = math.inf
        self.lease: NodeLease | None = None

    @classmethod
    def leased(
        cls, wire: Wire, *, ttl: float = 30.0, clock: Callable[[], int] | None = None
    ) -> Minter:
        """A minter whose node is leased from the engine on ``wire`` by :meth:`ready` and
        renewed in the background every ``ttl / 3`` seconds until :meth:`release`."""
        from echomq.engine.nodes import NodeLease  # the lease speaks to the engine: imported late

        minter = cls(0, clock)
        minter._valid_until = -math.inf
        minter.lease = NodeLease(wire, minter, ttl=ttl)
        return minter

    @property
    def is_ready(self) -> bool:
        """Whether :meth:`mint` can mint now (always, for an explicit node)."""
        return time.monotonic() < self._valid_until

    async def ready(self) -> None:
        """Lease a node if this minter has none (or its lease lapsed); no-op when explicit."""
        if self.lease is not None and not self.is_ready:
            await self.lease.acquire()

    async def release(self) -> None:
        """Give the leased node back (a later :meth:`ready` leases again); no-op when explicit."""
        if self.lease is not None:
            await self.lease.release()

    def last_ts(self) -> int:
        """The timestamp (ms since the epoch) of the newest id minted, or -1."""
        return self._last >> NODE_SHIFT if self._last >= 0 else -1

    def now_ts(self) -> int:
        """This minter's clock as an id timestamp (ms since the epoch)."""
        return self._clock() - EPOCH_MS

    def grant(self, node: int, floor: int, ceiling: float, valid_until: float) -> None:
        """Hold ``node`` until ``valid_until`` (monotonic s), minting timestamps in (floor,
        ceiling]. A new node starts on a fresh ms, so byte order stays mint order across it."""
        with self._lock:
            if node != self.node and self._last >= 0:
                self._last |= MAX_SEQ  # the next mint carries into the next ms
            if floor > 0:
                self._last = max(self._last, ((floor + 1) << NODE_SHIFT) - 1)
            self.node, self._ceiling, self._valid_until = node, ceiling, valid_until

    def lapse(self) -> None:
        """Stop minting until the next :meth:`grant` (the node's lease was lost)."""
        self._valid_until = -math.inf

    def next_number(self) -> int:
        """The next snowflake number; strictly greater than every number minted before."""
        now = (self._clock() - EPOCH_MS) << NODE_SHIFT
        if time.monotonic() >= self._valid_until:
            raise NodeLeaseError(
                "this minter holds no node lease (never taken, released, or lapsed because the "
                "engine could not be reached to renew it): await minter.ready() first"
            )
        with self._lock:
            cell = max(now, self._last + 1)
            ts = cell >> NODE_SHIFT
            if ts > self._ceiling:
                raise NodeLeaseError(
                    f"id timestamp {ts} passed the node lease's ceiling {self._ceiling}: "
                    "await minter.ready() after the next renewal"
                )
            self._last = cell
            node = self.node
        if ts > MAX_TS:
            raise InvalidArgument("clock", ts + EPOCH_MS, "is beyond the 41-bit timestamp range")
        return ts << TS_SHIFT | node << NODE_SHIFT | (cell & MAX_SEQ)

    def mint(self, namespace: str) -> str:
        """A fresh branded id in ``namespace`` (3 uppercase letters A–Z)."""
        if not isinstance(namespace, str) or not _is_namespace(namespace):
            raise InvalidArgument("namespace", namespace, _NAMESPACE_RULE)
        return namespace + _encode_payload(self.next_number())

"""The keyspace: the only place that builds key strings, and the names that go into them.

Every key of queue ``q`` is ``emq:{q}:<suffix>`` so the whole queue shares one cluster slot;
names and ids are validated here, before any wire traffic. Also the client-side slot function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from echomq import _ids
from echomq._errors import InvalidArgument

#: The deployment-wide wire-version fence; its own hash tag keeps it apart from every queue.
VERSION_KEY: Final = "{emq}:version"
#: A queue may not be named this: its hash tag would collide with the deployment reserve.
RESERVED_QUEUE: Final = "emq"
#: The lane a job rides when enqueued without a group.
DEFAULT_GROUP: Final = "_"

SLOTS: Final = 16384

_QUEUE_CHARS: Final = "A-Za-z0-9._-"
_GROUP_CHARS: Final = "A-Za-z0-9._:@-"
_QUEUE_RE: Final = re.compile(f"[{_QUEUE_CHARS}]+")
_GROUP_RE: Final = re.compile(f"[{_GROUP_CHARS}]+")
_QUEUE_MAX: Final = 128
_GROUP_MAX: Final = 128
_DEDUP_MAX: Final = 255


def _check_name(
    argument: str, value: object, pattern: re.Pattern[str], chars: str, max_length: int
) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(argument, value, f"must be a str, got {type(value).__name__}")
    if not 1 <= len(value) <= max_length:
        raise InvalidArgument(
            argument, value, f"must be 1 to {max_length} characters, got {len(value)}"
        )
    if pattern.fullmatch(value) is None:
        position, char = next((i, c) for i, c in enumerate(value) if pattern.fullmatch(c) is None)
        raise InvalidArgument(
            argument,
            value,
            f"character {char!r} at position {position} is not allowed (allowed: {chars})",
        )
    return value


def validate_queue(name: object) -> str:
    """Return ``name`` if it is a legal queue name: ``[A-Za-z0-9._-]{1,128}`` and not ``emq``."""
    queue = _check_name("queue name", name, _QUEUE_RE, _QUEUE_CHARS, _QUEUE_MAX)
    if queue == RESERVED_QUEUE:
        raise InvalidArgument(
            "queue name", queue, "'emq' is reserved for the deployment-wide {emq}: keys"
        )
    return queue


def validate_group(name: object) -> str:
    """Return ``name`` if it is a legal group (lane) name: ``[A-Za-z0-9._:@-]{1,128}``."""
    return _check_name("group", name, _GROUP_RE, _GROUP_CHARS, _GROUP_MAX)


def validate_dedup(key: object) -> str:
    """Return ``key`` if it is a legal producer dedup key: ``[A-Za-z0-9._:@-]{1,255}``."""
    return _check_name("dedup key", key, _GROUP_RE, _GROUP_CHARS, _DEDUP_MAX)


def _crc16_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


_CRC16_TABLE: Final = _crc16_table()


def validate_bucket(name: object) -> str:
    """Return ``name`` if it is a legal token bucket name: ``[A-Za-z0-9._:@-]{1,255}``."""
    return _check_name("bucket name", name, _GROUP_RE, _GROUP_CHARS, _DEDUP_MAX)


def bucket_key(tag: str, name: str) -> str:
    """A token bucket: ``emqb:{tag}:<name>``; buckets taken together must share ``tag``."""
    return "emqb:{" + validate_queue(tag) + "}:" + validate_bucket(name)


def crc16(data: bytes) -> int:
    """CRC16-XMODEM (poly 0x1021, init 0), the checksum behind Valkey Cluster slots."""
    crc = 0
    table = _CRC16_TABLE
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ table[(crc >> 8) ^ byte]
    return crc


def slot(key: str | bytes) -> int:
    """The cluster slot of ``key``: CRC16 of its hash tag (the first non-empty ``{…}``) mod 16384.

    As in Valkey, only the first ``{`` counts; an empty ``{}`` or an unclosed ``{`` means the
    whole key is hashed.
    """
    data = key.encode() if isinstance(key, str) else key
    start = data.find(b"{")
    if start != -1:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1 : end]
    return crc16(data) % SLOTS


@dataclass(frozen=True, slots=True)
class Keyspace:
    """Every key of one queue. Construction validates the queue name.

    Fixed keys are attributes; keys with a variable part are methods that validate it first.
    """

    queue: str
    root: str = field(init=False, repr=False)
    ring: str = field(init=False, repr=False)
    paused: str = field(init=False, repr=False)
    glimit: str = field(init=False, repr=False)
    gactive: str = field(init=False, repr=False)
    gweight: str = field(init=False, repr=False)
    grate: str = field(init=False, repr=False)
    turn: str = field(init=False, repr=False)
    lanes: str = field(init=False, repr=False)
    rdue: str = field(init=False, repr=False)
    active: str = field(init=False, repr=False)
    schedule: str = field(init=False, repr=False)
    dead: str = field(init=False, repr=False)
    wake: str = field(init=False, repr=False)
    meta: str = field(init=False, repr=False)
    limiter: str = field(init=False, repr=False)
    events: str = field(init=False, repr=False)
    completed: str = field(init=False, repr=False)
    failed: str = field(init=False, repr=False)
    gate: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        validate_queue(self.queue)
        root = f"emq:{{{self.queue}}}:"
        fixed = {
            "root": root,
            "ring": root + "ring",
            "paused": root + "paused",
            "glimit": root + "glimit",
            "gactive": root + "gactive",
            "gweight": root + "gweight",
            # group -> "max:window" (jobs per window ms) for per-lane rate limits
            "grate": root + "grate",
            # the lane at the head of the ring and how many claims it had this visit (weights)
            "turn": root + "turn",
            # groups whose lane is non-empty (the read plane and drain enumerate lanes by it)
            "lanes": root + "lanes",
            # lanes benched by their rate limit, scored by the ms their window ends
            "rdue": root + "rdue",
            "active": root + "active",
            "schedule": root + "schedule",
            "dead": root + "dead",
            "wake": root + "wake",
            "meta": root + "meta",
            "limiter": root + "limiter",
            "events": root + "events",
            "completed": root + "metrics:completed",
            "failed": root + "metrics:failed",
            # Declared by every script with the root: while a cluster migrates the queue's slot,
            # the root (as a key) and the gate exist only where the scripts may run, so a node
            # holding one without the other answers TRYAGAIN (docs/cluster.md, "Migrating").
            "gate": root + "gate",
        }
        for name, key in fixed.items():
            object.__setattr__(self, name, key)

    @classmethod
    def for_queue(cls, queue: str) -> Keyspace:
        """The keyspace of ``queue``; raises ``InvalidArgument`` for an illegal name."""
        return cls(queue)

    def job(self, id: str) -> str:
        """The job row ``job:<id>``; ``id`` must be a well-formed branded id (any namespace)."""
        return self.root + "job:" + _ids.validate(id, argument="job id")

    def lane(self, group: str) -> str:
        """The lane of ``group``: ``g:<group>:pending``, its pending job ids in mint order."""
        return self.root + "g:" + validate_group(group) + ":pending"

    def lane_limiter(self, group: str) -> str:
        """The fixed-window rate counter of ``group``'s lane: ``g:<group>:limiter``."""
        return self.root + "g:" + validate_group(group) + ":limiter"

    def dedup(self, key: str) -> str:
        """The producer dedup key ``de:<key>`` that maps to a job id."""
        return self.root + "de:" + validate_dedup(key)

    def all_fixed(self) -> tuple[str, ...]:
        """Every fixed key of the queue (not the per-job, per-lane or dedup keys)."""
        return (
            self.ring,
            self.paused,
            self.glimit,
            self.gactive,
            self.gweight,
            self.grate,
            self.turn,
            self.lanes,
            self.rdue,
            self.active,
            self.schedule,
            self.dead,
            self.wake,
            self.meta,
            self.limiter,
            self.events,
            self.completed,
            self.failed,
            self.gate,
        )

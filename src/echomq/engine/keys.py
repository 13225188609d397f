"""The keyspace: the only place that builds key strings (``Keyspace``, ``bucket_key``).

Every key of queue ``q`` is ``emq:{q}:<suffix>`` so the whole queue shares one cluster slot; a
sharded queue's shard k >= 1 is a whole keyspace under a tag of its own, ``q~k`` or ``q~k.n``
(docs/concepts/shards.md). The names that go into keys are checked in names.py and every key is
declared in layout.py; both are named here too, as is the slot function of the wire
(echomq.wire.slots), which routes keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from echomq.engine import ids as _ids

# The declared layout and the names that go into keys have modules of their own; this one, which
# builds the keys, names them too, as every caller imports them from here.
from echomq.engine.layout import LAYOUT as LAYOUT
from echomq.engine.layout import QUEUE_ROOT as QUEUE_ROOT
from echomq.engine.layout import KeyShape as KeyShape
from echomq.engine.names import DEFAULT_GROUP as DEFAULT_GROUP
from echomq.engine.names import MAX_NAME_BYTES as MAX_NAME_BYTES
from echomq.engine.names import MAX_NONCE as MAX_NONCE
from echomq.engine.names import SHARD_MARK as SHARD_MARK
from echomq.engine.names import parse_shard_tag as parse_shard_tag
from echomq.engine.names import shard_tag as shard_tag
from echomq.engine.names import validate_bucket as validate_bucket
from echomq.engine.names import validate_dedup as validate_dedup
from echomq.engine.names import validate_group as validate_group
from echomq.engine.names import validate_queue as validate_queue
from echomq.errors import InvalidArgument

# The wire routes keys and fences connections with these; the keyspace names them too.
from echomq.wire.slots import SLOTS as SLOTS
from echomq.wire.slots import VERSION_KEY as VERSION_KEY
from echomq.wire.slots import crc16 as crc16
from echomq.wire.slots import slot as slot

#: The ``done`` channel's message for "re-read every waited row" (no job id is one byte long).
DONE_WILDCARD: Final = "*"


def bucket_key(tag: str, name: str) -> str:
    """A token bucket: ``emqb:{tag}:<name>``; buckets taken together must share ``tag``."""
    return "emqb:{" + validate_queue(tag) + "}:" + validate_bucket(name)


#: ``Keyspace``'s fixed keys: (attribute, suffix after the root), in ``LAYOUT`` order.
_FIXED: Final[tuple[tuple[str, str], ...]] = tuple(
    (shape.source.removeprefix("Keyspace."), shape.pattern.removeprefix(QUEUE_ROOT))
    for shape in LAYOUT
    if shape.source.startswith("Keyspace.")
    and shape.pattern != QUEUE_ROOT
    and shape.placeholders == ("q",)
)


@dataclass(frozen=True, slots=True)
class Keyspace:
    """Every key of one queue, or of one shard of a sharded queue. Construction validates the
    queue name; ``tag`` is the hash tag, the queue's own name unless ``for_shard`` built it.

    Fixed keys are attributes; keys with a variable part are methods that validate it first.
    """

    queue: str
    tag: str = field(default="", repr=False)
    root: str = field(init=False, repr=False)
    ring: str = field(init=False, repr=False)
    paused: str = field(init=False, repr=False)
    cooling: str = field(init=False, repr=False)
    glimit: str = field(init=False, repr=False)
    gactive: str = field(init=False, repr=False)
    gextra: str = field(init=False, repr=False)
    gweight: str = field(init=False, repr=False)
    gdeficit: str = field(init=False, repr=False)
    grun: str = field(init=False, repr=False)
    grate: str = field(init=False, repr=False)
    gcap: str = field(init=False, repr=False)
    gscheduled: str = field(init=False, repr=False)
    policies: str = field(init=False, repr=False)
    turn: str = field(init=False, repr=False)
    gband: str = field(init=False, repr=False)
    holders: str = field(init=False, repr=False)
    lanes: str = field(init=False, repr=False)
    rdue: str = field(init=False, repr=False)
    active: str = field(init=False, repr=False)
    schedule: str = field(init=False, repr=False)
    dead: str = field(init=False, repr=False)
    done: str = field(init=False, repr=False)
    dedups: str = field(init=False, repr=False)
    wake: str = field(init=False, repr=False)
    meta: str = field(init=False, repr=False)
    fsync: str = field(init=False, repr=False)
    limiter: str = field(init=False, repr=False)
    claims: str = field(init=False, repr=False)
    served: str = field(init=False, repr=False)
    rates: str = field(init=False, repr=False)
    events: str = field(init=False, repr=False)
    completed: str = field(init=False, repr=False)
    failed: str = field(init=False, repr=False)
    cancelled: str = field(init=False, repr=False)
    cancel: str = field(init=False, repr=False)
    gate: str = field(init=False, repr=False)
    periodic: str = field(init=False, repr=False)
    waiting: str = field(init=False, repr=False)
    outbox: str = field(init=False, repr=False)
    directory: str = field(init=False, repr=False)
    placed: str = field(init=False, repr=False)
    owns: str = field(init=False, repr=False)
    moved: str = field(init=False, repr=False)
    adopted: str = field(init=False, repr=False)
    importing: str = field(init=False, repr=False)
    migrating: str = field(init=False, repr=False)
    ringweight: str = field(init=False, repr=False)
    rebalancer: str = field(init=False, repr=False)
    placing: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        validate_queue(self.queue)
        if not self.tag:
            object.__setattr__(self, "tag", self.queue)
        elif self.tag != self.queue and parse_shard_tag(self.tag)[0] != self.queue:
            raise InvalidArgument("shard tag", self.tag, f"is not a tag of queue {self.queue!r}")
        root = QUEUE_ROOT.replace("<q>", self.tag)
        object.__setattr__(self, "root", root)
        for name, suffix in _FIXED:
            object.__setattr__(self, name, root + suffix)

    def __repr__(self) -> str:
        shard = "" if self.tag == self.queue else f", tag={self.tag!r}"
        return f"Keyspace(queue={self.queue!r}{shard})"

    @classmethod
    def for_queue(cls, queue: str) -> Keyspace:
        """The keyspace of ``queue``; raises ``InvalidArgument`` for an illegal name."""
        return cls(queue)

    @classmethod
    def for_shard(cls, tag: str) -> Keyspace:
        """The keyspace of the shard whose hash tag is ``tag`` (``q``, ``q~k`` or ``q~k.n``):
        its ``queue`` is the text before the ``~``. Raises ``InvalidArgument`` ("shard tag")."""
        queue, _ = parse_shard_tag(tag)
        return cls(queue, tag)

    def job(self, id: str) -> str:
        """The job row ``job:<id>``; ``id`` must be a well-formed branded id (any namespace)."""
        return self.root + "job:" + _ids.validate(id, argument="job id")

    def log(self, id: str) -> str:
        """The job's log ``log:<id>`` (a LIST, oldest line first), alive as long as its row."""
        return self.root + "log:" + _ids.validate(id, argument="job id")

    def flow_results(self, id: str) -> str:
        """A flow parent's succeeded children ``flow:<id>:results``: child id -> result."""
        return self.root + "flow:" + _ids.validate(id, argument="job id") + ":results"

    def flow_failed(self, id: str) -> str:
        """A flow parent's failed children ``flow:<id>:failed``: child id -> error text."""
        return self.root + "flow:" + _ids.validate(id, argument="job id") + ":failed"

    def flow_expected(self, id: str) -> str:
        """A flow parent about to be admitted ``flow:<id>:expected``: its entries wait for it."""
        return self.root + "flow:" + _ids.validate(id, argument="job id") + ":expected"

    def lane(self, group: str) -> str:
        """The lane of ``group``: ``g:<group>:pending``, its pending job ids in mint order."""
        return self.root + "g:" + validate_group(group) + ":pending"

    def lane_limiter(self, group: str) -> str:
        """The fixed-window rate counter of ``group``'s lane: ``g:<group>:limiter``."""
        return self.root + "g:" + validate_group(group) + ":limiter"

    def lane_claims(self, group: str) -> str:
        """The sliding log of ``group``'s lane (smooth rate): ``g:<group>:claims``."""
        return self.root + "g:" + validate_group(group) + ":claims"

    def band_ring(self, band: int) -> str:
        """The ring of priority band ``band`` (0..9): ``ring`` for the default, else
        ``band:<band>:ring``."""
        return self.ring if band == 5 else self.root + "band:" + str(_band(band)) + ":ring"

    def band_turn(self, band: int) -> str:
        """The turn of priority band ``band``'s ring: ``turn`` for the default, else
        ``band:<band>:turn``."""
        return self.turn if band == 5 else self.root + "band:" + str(_band(band)) + ":turn"

    def dedup(self, key: str) -> str:
        """The producer dedup key ``de:<key>`` that maps to a job id."""
        return self.root + "de:" + validate_dedup(key)

    def all_fixed(self) -> tuple[str, ...]:
        """Every fixed key of the queue (not the per-job, per-lane or dedup keys)."""
        return tuple(getattr(self, name) for name, _ in _FIXED)


def _band(band: int) -> int:
    """A priority band, 0..9 (a one-digit string too: the shape's sample)."""
    if isinstance(band, str) and len(band) == 1 and band.isdigit():
        band = int(band)
    if isinstance(band, bool) or not isinstance(band, int) or not 0 <= band <= 9:
        raise InvalidArgument("band", band, "must be an integer from 0 to 9")
    return band

"""The declared layout of the keyspace: ``LAYOUT``, one ``KeyShape`` per kind of key echomq
builds (its pattern, its Valkey type, its builder, what it holds). ``Keyspace`` (keys.py) derives
its fixed keys from it; echomq.engine.keys re-exports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

KeyType = Literal["STRING", "HASH", "LIST", "SET", "ZSET", "channel"]

_PLACEHOLDER: Final = re.compile(r"<(\w+)>")


@dataclass(frozen=True, slots=True)
class KeyShape:
    """One kind of key: its pattern, its Valkey type, what builds it and what it holds.

    ``pattern`` is the whole key. ``<name>`` stands for a variable part, named as the builder's
    parameter (``<q>`` is the queue); everything else is literal, braces included: they are the
    hash tag. ``source`` names the builder: ``Keyspace.<member>`` or a module-level name
    (dotted when it lives outside keys.py). ``host_only`` marks a key no script names: only
    the host touches it (tests/unit/test_keyspace_lua.py holds the scripts to the layout).
    ``planned`` names the landing of docs/concepts/shards.md that brings a key's first reader
    or writer: until it lands nothing touches the key, and the mark comes off when it does.
    """

    pattern: str
    type: KeyType
    source: str
    meaning: str
    host_only: bool = False
    planned: str = ""

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The names of the variable parts, in order."""
        return tuple(_PLACEHOLDER.findall(self.pattern))

    def fill(self, **parts: str) -> str:
        """The key with every ``<name>`` replaced by ``parts[name]`` (no validation)."""
        return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], self.pattern)


#: The root every key of queue ``q`` starts with; each script gets it as ``KEYS[1]``.
QUEUE_ROOT: Final = "emq:{<q>}:"

#: Every key echomq builds, one shape each: the one declared layout. ``Keyspace`` derives its
#: fixed keys (and their order in ``all_fixed``) from it. tests/unit/test_keyspace_lua.py holds
#: the rest to it: the ``Keyspace`` methods, ``VERSION_KEY``, ``bucket_key``, ``nodes.NODES_KEY``,
#: every key the Lua scripts build, and the keyspace table of docs/reference/keyspace.md.
LAYOUT: Final[tuple[KeyShape, ...]] = (
    KeyShape(
        QUEUE_ROOT,
        "STRING",
        "Keyspace.root",
        "the prefix of every key of the queue (KEYS[1] of its scripts); as a key, absent except "
        "while a slot migration lets the queue's scripts run on a node (docs/guides/cluster.md)",
    ),
    KeyShape(
        QUEUE_ROOT + "ring",
        "LIST",
        "Keyspace.ring",
        "the default priority band's ring: exactly its serviceable lanes (those whose head job "
        "is in the band), each once; the head is served next",
    ),
    KeyShape(
        QUEUE_ROOT + "gband",
        "HASH",
        "Keyspace.gband",
        "group -> the band whose ring holds its lane, for a lane on a band other than the default",
    ),
    KeyShape(QUEUE_ROOT + "paused", "SET", "Keyspace.paused", "paused lanes"),
    KeyShape(
        QUEUE_ROOT + "cooling",
        "HASH",
        "Keyspace.cooling",
        "group -> server ms its lane cools until (lane.cool, a handler's Cool); an entry past "
        "its time is dropped by the next write that reads it",
    ),
    KeyShape(QUEUE_ROOT + "glimit", "HASH", "Keyspace.glimit", "group -> its lane's ceiling"),
    KeyShape(QUEUE_ROOT + "gactive", "HASH", "Keyspace.gactive", "group -> its lane's leased jobs"),
    KeyShape(
        QUEUE_ROOT + "gextra",
        "HASH",
        "Keyspace.gextra",
        "group -> the costs above 1 of its lane's leased jobs (its ceiling counts units)",
    ),
    KeyShape(
        QUEUE_ROOT + "gweight",
        "HASH",
        "Keyspace.gweight",
        "group -> claims per ring visit (absent = 1)",
    ),
    KeyShape(
        QUEUE_ROOT + "gdeficit",
        "HASH",
        "Keyspace.gdeficit",
        "group -> its lane's credit under fairness by work (meta fair): units, or ms of run "
        "time; negative is a debt (deficit round robin, see _fair.lua); lanes with work only",
    ),
    KeyShape(
        QUEUE_ROOT + "grun",
        "HASH",
        "Keyspace.grun",
        "group -> its lane's jobs' run time in ms, a moving average (fairness by time)",
    ),
    KeyShape(
        QUEUE_ROOT + "grate",
        "HASH",
        "Keyspace.grate",
        'group -> "max:window" (jobs per window ms; fixed window) or "max:window:smooth" '
        "(sliding window), its lane's own rate budget",
    ),
    KeyShape(
        QUEUE_ROOT + "gcap",
        "HASH",
        "Keyspace.gcap",
        "group -> its lane's own backlog cap: unfinished jobs admission lets it hold",
    ),
    KeyShape(
        QUEUE_ROOT + "gscheduled",
        "HASH",
        "Keyspace.gscheduled",
        "group -> its lane's jobs in the schedule (delayed, retrying, deferred); the cap counts "
        "them",
    ),
    KeyShape(
        QUEUE_ROOT + "policies",
        "HASH",
        "Keyspace.policies",
        "group -> its lane policy as JSON: the lanes named by the last policies applied",
    ),
    KeyShape(
        QUEUE_ROOT + "turn",
        "HASH",
        "Keyspace.turn",
        "the lane at the head of the ring (group) and its claims this visit (served)",
    ),
    KeyShape(
        QUEUE_ROOT + "band:<band>:ring",
        "LIST",
        "Keyspace.band_ring",
        "priority band <band>'s ring (a band other than the default 5): as ring",
    ),
    KeyShape(
        QUEUE_ROOT + "band:<band>:turn",
        "HASH",
        "Keyspace.band_turn",
        "the lane at the head of band <band>'s ring and its claims this visit: as turn",
    ),
    KeyShape(
        QUEUE_ROOT + "holders",
        "HASH",
        "Keyspace.holders",
        "ordered queues: group -> the job holding its lane (claimed, not finished: leased, "
        "scheduled by a retry or a defer, or back in the lane after a reap)",
    ),
    KeyShape(
        QUEUE_ROOT + "lanes",
        "SET",
        "Keyspace.lanes",
        "groups whose lane is non-empty (the read plane and drain enumerate lanes by it)",
    ),
    KeyShape(
        QUEUE_ROOT + "rdue",
        "ZSET",
        "Keyspace.rdue",
        "lanes benched by their rate limit, scored by the ms their window ends",
    ),
    KeyShape(
        QUEUE_ROOT + "active",
        "ZSET",
        "Keyspace.active",
        "leased job ids, scored by their lease deadline (ms, server clock)",
    ),
    KeyShape(
        QUEUE_ROOT + "schedule",
        "ZSET",
        "Keyspace.schedule",
        "delayed and retrying job ids, scored by their run-at ms",
    ),
    KeyShape(
        QUEUE_ROOT + "dead", "ZSET", "Keyspace.dead", "dead-lettered job ids, scored by ms of death"
    ),
    KeyShape(
        QUEUE_ROOT + "done",
        "ZSET",
        "Keyspace.done",
        "completed job ids whose rows are kept as results (result_ttl > 0), scored by the ms "
        "their rows expire (members below now are trimmed); also the name of the shard channel "
        "each completion, burial and deleted row is announced on (SPUBLISH <id>, or * for every "
        "waited row, from the script)",
    ),
    KeyShape(
        QUEUE_ROOT + "wake",
        "LIST",
        "Keyspace.wake",
        "wake tokens (at most 64); parked consumers BLPOP it",
    ),
    KeyShape(
        QUEUE_ROOT + "meta",
        "HASH",
        "Keyspace.meta",
        "queue settings: paused, concurrency, max, window, mode, ordered, fair, quantum; the "
        "default for lanes: dlimit, dweight, drate; banded and bands (priority bands, see "
        "claim.lua); costed (the dearest cost admitted); on a shard of a sharded queue, shard "
        "(its index) and epoch (the placement epoch its fence was written at)",
    ),
    KeyShape(
        QUEUE_ROOT + "fsync",
        "STRING",
        "Keyspace.fsync",
        "a one-second mark a durable admission writes when its batch met a duplicate, so the "
        "WAITAOF after it covers the earlier write the duplicate points at",
        host_only=True,
    ),
    KeyShape(
        QUEUE_ROOT + "limiter",
        "STRING",
        "Keyspace.limiter",
        "the queue's fixed-window rate counter; its PTTL is the window left",
    ),
    KeyShape(
        QUEUE_ROOT + "claims",
        "LIST",
        "Keyspace.claims",
        "the queue's sliding log (smooth rate): server ms of its newest claims, oldest first "
        "(the newest max decide; at most 2 * max kept; no expiry: one bounded key per queue)",
    ),
    KeyShape(
        QUEUE_ROOT + "served",
        "HASH",
        "Keyspace.served",
        "\"\" -> the queue's claims, group -> its lane's, counted since the last fold into rates",
    ),
    KeyShape(
        QUEUE_ROOT + "rates",
        "HASH",
        "Keyspace.rates",
        "measured claim rates for ETAs: \"\" -> the queue's, group -> its lane's, each "
        '"rate:at:since" (claims/s decayed with a 5 s time constant, as of server ms at; since: '
        "the ms this spell began); folded from served every 64 claims",
    ),
    KeyShape(
        QUEUE_ROOT + "events",
        "channel",
        "Keyspace.events",
        "lifecycle events as JSON, published host-side after a transition",
        host_only=True,
    ),
    KeyShape(
        QUEUE_ROOT + "metrics:completed",
        "HASH",
        "Keyspace.completed",
        "field count: jobs completed",
    ),
    KeyShape(
        QUEUE_ROOT + "metrics:failed", "HASH", "Keyspace.failed", "field count: jobs dead-lettered"
    ),
    KeyShape(
        QUEUE_ROOT + "metrics:cancelled",
        "HASH",
        "Keyspace.cancelled",
        "field count: jobs cancelled",
    ),
    KeyShape(
        QUEUE_ROOT + "cancel",
        "channel",
        "Keyspace.cancel",
        "the shard channel a cancel of a leased job is announced on (SPUBLISH <id>, from "
        "cancel.lua); each consumer process subscribes once per queue and stops the handler",
    ),
    # Declared by every script call with the root: while a cluster migrates the queue's slot,
    # the root (as a key) and the gate exist only where the scripts may run, so a node holding
    # one without the other answers TRYAGAIN (docs/guides/cluster.md, "Migrating").
    KeyShape(
        QUEUE_ROOT + "gate",
        "STRING",
        "Keyspace.gate",
        "KEYS[2] of every script call, never read by one; set with the root by a slot migration",
        host_only=True,
    ),
    KeyShape(
        QUEUE_ROOT + "periodic",
        "HASH",
        "Keyspace.periodic",
        "schedule name -> the Unix ms of its last enqueued tick (the task layer's schedulers)",
    ),
    KeyShape(
        QUEUE_ROOT + "waiting",
        "ZSET",
        "Keyspace.waiting",
        "flow parents waiting for their children (state waiting, in no lane), score 0",
    ),
    KeyShape(
        QUEUE_ROOT + "flow:outbox",
        "LIST",
        "Keyspace.outbox",
        "flow entries for parents on other queues, oldest first: a child's completion or "
        "death, relayed to the parent's queue at least once by the worker's upkeep",
    ),
    KeyShape(
        QUEUE_ROOT + "flow:<id>:results",
        "HASH",
        "Keyspace.flow_results",
        "a flow parent's succeeded children: child id -> its result (the codec's bytes); "
        "with :failed, the guard that counts each child once; lives as long as the row",
    ),
    KeyShape(
        QUEUE_ROOT + "flow:<id>:failed",
        "HASH",
        "Keyspace.flow_failed",
        "a flow parent's failed children: child id -> its error (ignored, or the one that "
        "failed the parent); lives as long as the row",
    ),
    KeyShape(
        QUEUE_ROOT + "flow:<id>:expected",
        "STRING",
        "Keyspace.flow_expected",
        "a flow parent not admitted yet whose children on other queues were (a flow nesting "
        "queues both ways); for 60 s, the relay keeps their entries until it comes",
    ),
    KeyShape(
        QUEUE_ROOT + "job:<id>",
        "HASH",
        "Keyspace.job",
        "a job's row: state, attempts (the fencing token), payload, group, and the optional rest",
    ),
    KeyShape(
        QUEUE_ROOT + "log:<id>",
        "LIST",
        "Keyspace.log",
        "a job's log: its newest lines (at most the keep its reporter asked, ≤ 1000), oldest "
        "first; deleted with the row, given a kept row's expiry",
    ),
    KeyShape(
        QUEUE_ROOT + "g:<group>:pending",
        "ZSET",
        "Keyspace.lane",
        "a lane: its pending job ids, score 0 (byte order = mint order)",
    ),
    KeyShape(
        QUEUE_ROOT + "g:<group>:limiter",
        "STRING",
        "Keyspace.lane_limiter",
        "the lane's fixed-window rate counter; its PTTL is the window left",
    ),
    KeyShape(
        QUEUE_ROOT + "g:<group>:claims",
        "LIST",
        "Keyspace.lane_claims",
        "the lane's sliding log (smooth rate): server ms of its newest claims, oldest first "
        "(the newest max decide; at most 2 * max kept), expiring a window after the newest",
    ),
    KeyShape(
        QUEUE_ROOT + "dedups",
        "ZSET",
        "Keyspace.dedups",
        "the dedup keys that have a TTL of their own (they outlive their jobs), scored by the ms "
        "they expire; trimmed as enqueues and windows from a job's end pass, swept by obliterate",
    ),
    KeyShape(
        QUEUE_ROOT + "de:<key>",
        "STRING",
        "Keyspace.dedup",
        "a producer dedup key -> its job id; lives for its own TTL (dedup_ttl) from enqueue, "
        "or from the job's end (dedup_after), else as long as the job's row and not past its "
        "death",
    ),
    # A sharded queue (docs/concepts/shards.md): the directory and the overrides live on shard
    # 0 (the queue's own tag); the fence, the ring-weight counters and the marks of a change of
    # the shard count live on every shard. Those no landing reads or writes yet are `planned`.
    KeyShape(
        QUEUE_ROOT + "shards",
        "HASH",
        "Keyspace.directory",
        "a sharded queue's directory, on shard 0: count, epoch (of placement), tags (each "
        'shard\'s, space-joined), table (the lane-slot table, "first:shard" runs) '
        "(echomq.engine.shards.ShardMap); the queue-wide budgets concurrency and rate "
        "(echomq.engine.rebalancer); later the move in progress; read by a script only to "
        "name the queue in its EMQSHARDED refusal (unfenced in _shard.lua)",
    ),
    KeyShape(
        QUEUE_ROOT + "placed",
        "HASH",
        "Keyspace.placed",
        "a sharded queue's lane overrides, on shard 0: lane -> the shard it was moved to, off "
        "the one its lane slot names (a read copy; the shards' moved and adopted decide)",
        host_only=True,
    ),
    KeyShape(
        QUEUE_ROOT + "owns",
        "STRING",
        "Keyspace.owns",
        "a shard's lane slots, a 16,384-bit bitmap (GETBIT <lane slot>): the authoritative copy "
        "of its part of the directory's table, checked by the fence with the write (enqueue, flow "
        "and reassign on a shard: _shard.lua)",
    ),
    KeyShape(
        QUEUE_ROOT + "moved",
        "HASH",
        "Keyspace.moved",
        "lane -> the shard it moved to: lanes of this shard's slots that it no longer serves "
        "(their enqueues are refused toward that shard)",
    ),
    KeyShape(
        QUEUE_ROOT + "adopted",
        "HASH",
        "Keyspace.adopted",
        'lane -> "" (adopted) or its source shard (arriving, held off the ring): lanes this '
        "shard serves though its owns does not name their slot",
    ),
    KeyShape(
        QUEUE_ROOT + "importing",
        "STRING",
        "Keyspace.importing",
        "while the shard count grows: a 16,384-bit bitmap of the lane slots this shard is "
        "taking over (the fence admits their lanes; ShardedQueue.add_shards)",
    ),
    KeyShape(
        QUEUE_ROOT + "migrating",
        "STRING",
        "Keyspace.migrating",
        "while the shard count grows: 16,384 bytes, byte s the index of the shard lane slot s "
        "is handed to (0: none); their owns bits are off, and the fence admits a lane of such a "
        "slot only while it has jobs here, else refuses it toward that shard",
    ),
    KeyShape(
        QUEUE_ROOT + "ringweight",
        "HASH",
        "Keyspace.ringweight",
        "the ring-weight counters, per band 0..9: own:<band> (the own weights of its ringed "
        "lanes that have one, summed) and count:<band> (its ringed lanes on the default weight); "
        "W_s = own + count * dweight; a field at 0 is deleted (ring_count in lua/_ring.lua)",
    ),
    KeyShape(
        QUEUE_ROOT + "rebalancer",
        "HASH",
        "Keyspace.rebalancer",
        "the quota rebalancer's lease, on shard 0: owner, until (server ms) and token (the "
        "fencing token, one more at each new holder; quota.lua refuses an older one)",
    ),
    KeyShape(
        QUEUE_ROOT + "placing",
        "STRING",
        "Keyspace.placing",
        'the placement lease of a sharded queue, on shard 0: "<token> <holder>" of the one lane '
        "move or grow running, PX its time to live (extended while it works; "
        "lua/placement_lease.lua)",
    ),
    KeyShape(
        "{emq}:version",
        "STRING",
        "VERSION_KEY",
        "the deployment's wire-version fence, set NX on connect",
        host_only=True,
    ),
    KeyShape(
        "{emq}:nodes",
        "HASH",
        "echomq.engine.nodes.NODES_KEY",
        'node leases of the id space: node -> "owner:expires_ms:ceiling"',
    ),
    KeyShape(
        "emqb:{<tag>}:<name>",
        "HASH",
        "bucket_key",
        "a token bucket (tokens, at); the buckets of one take share the tag",
    ),
)

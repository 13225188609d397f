"""Flows: a parent job that runs once its children settled, with their results handed to it.

:class:`Flow` describes a tree (children may be parents themselves, and may live on other
queues); :func:`plan` checks it whole and lays it out as one ``flow.lua`` call per queue;
:class:`Children` is what a parent reads of its children; :func:`relay` delivers the outbox
entries of children whose parent lives on another queue (another slot on a cluster).
No step here writes before every node of the flow passed its checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from echomq.engine import ids as _ids
from echomq.engine.checks import MAX_PAYLOAD, text
from echomq.engine.keys import DEFAULT_GROUP, Keyspace, validate_group
from echomq.engine.options import lane_alias
from echomq.errors import InvalidArgument, renamed
from echomq.wire.codec import Codec

#: Most nodes in one flow (the root, its children, theirs …), and most children of a parent.
MAX_FLOW_NODES = 1_000
#: Deepest a flow may nest: the root is depth 0, a grandchild depth 2.
MAX_FLOW_DEPTH = 32
#: Outbox entries one relay pass reads and delivers.
RELAY_BATCH = 100
#: How long the relay keeps an entry for a parent that is expected but not admitted yet (ms;
#: flow_deliver.lua drops such an entry at this age too).
EXPECTED_MS = 60_000

#: What a child's death does to its parent: ``fail_parent`` buries the parent (its error names
#: the child); ``ignore`` records the failure and counts the child as settled.
FailurePolicy = Literal["fail_parent", "ignore"]
_POLICIES: Mapping[str, str] = {"fail_parent": "fail", "ignore": "ignore"}


@dataclass(frozen=True, slots=True, init=False)
class Flow:
    """One node of a flow: a job, and the children it waits for (none: a leaf).

    ``queue`` None means its parent's queue (the root's: the queue ``add_flow`` is called on);
    ``lane`` its lane (``group=`` the deprecated name); ``id`` a ``JOB`` id (minted when
    omitted); ``on_failure`` what its own death does to its parent.
    """

    payload: Any
    children: Sequence[Flow] = ()
    queue: str | None = None
    lane: str | None = None
    id: str | None = None
    on_failure: FailurePolicy = "fail_parent"

    def __init__(
        self,
        payload: Any,
        children: Sequence[Flow] = (),
        queue: str | None = None,
        lane: str | None = None,
        id: str | None = None,
        on_failure: FailurePolicy = "fail_parent",
        *,
        group: str | None = None,
    ) -> None:
        if group is not None:
            lane = lane_alias(lane, group)
        setattr = object.__setattr__  # frozen: set once, here
        setattr(self, "payload", payload)
        setattr(self, "children", children)
        setattr(self, "queue", queue)
        setattr(self, "lane", lane)
        setattr(self, "id", id)
        setattr(self, "on_failure", on_failure)

    @property
    def group(self) -> str | None:
        """Deprecated: :attr:`lane`, the same value."""
        renamed("Flow.group", "Flow.lane")
        return self.lane


@dataclass(frozen=True, slots=True)
class FlowIds:
    """The ids of an admitted flow, shaped like the :class:`Flow`: this node's id and queue,
    and its children's. ``kind`` is ``enqueued``, or ``duplicate`` when every queue's nodes
    existed already (the flow was admitted before: nothing was written)."""

    id: str
    queue: str
    children: tuple[FlowIds, ...] = ()
    kind: Literal["enqueued", "duplicate"] = "enqueued"

    @property
    def ids(self) -> list[str]:
        """Every node's id, parents before their children."""
        out = [self.id]
        for child in self.children:
            out += child.ids
        return out


@dataclass(frozen=True, slots=True)
class Children:
    """What a parent's children left it: ``ids`` in flow order, ``results`` (decoded with the
    parent queue's codec) of those that completed, ``failed`` the errors of those that died
    (under ``ignore``, or the one whose death failed the parent)."""

    ids: tuple[str, ...] = ()
    results: Mapping[str, Any] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)

    def ordered(self) -> list[Any]:
        """The results in flow order; None for a child that failed or has not settled."""
        return [self.results.get(id) for id in self.ids]


@dataclass(frozen=True, slots=True)
class Node:
    """One node as ``flow.lua`` takes it; ``args()`` is its seven ``ARGV`` values."""

    id: str
    payload: bytes
    group: str
    parent: str
    parent_queue: str
    policy: str
    children: tuple[str, ...]

    def args(self) -> tuple[str | bytes, ...]:
        return (self.id, self.payload, self.group, self.parent, self.parent_queue,
                self.policy, " ".join(self.children))  # fmt: skip


@dataclass(slots=True)
class Plan:
    """A checked flow: each queue's nodes, in writing order (the root's queue first, then by
    the depth its nodes first appear at), and the ids to answer with."""

    writes: dict[str, list[Node]]
    ids: FlowIds


def plan(flow: Flow, queue: str, codec: Codec, mint: Callable[[], str]) -> Plan:
    """Check every node of ``flow`` (rooted on ``queue`` unless it names one) before anything
    is written; ``InvalidArgument`` names the node's argument refused."""
    if not isinstance(flow, Flow):
        raise InvalidArgument("flow", flow, "must be an echomq.engine.Flow")
    writes: dict[str, list[Node]] = {}
    seen: set[str] = set()
    total = [0, 0]  # nodes, payload bytes

    def visit(node: Flow, home: str, parent: Node | None, parent_queue: str, depth: int) -> FlowIds:
        where = f"flow node at depth {depth}"
        if not isinstance(node, Flow):
            raise InvalidArgument("children", node, f"{where}: children must be Flow values")
        if depth > MAX_FLOW_DEPTH:
            raise InvalidArgument("children", depth, f"a flow nests at most {MAX_FLOW_DEPTH} deep")
        total[0] += 1
        if total[0] > MAX_FLOW_NODES:
            raise InvalidArgument(
                "children", total[0], f"a flow has at most {MAX_FLOW_NODES} nodes"
            )
        name = home if node.queue is None else Keyspace(node.queue).queue
        policy = _POLICIES.get(node.on_failure) if isinstance(node.on_failure, str) else None
        if policy is None:
            raise InvalidArgument("on_failure", node.on_failure, "must be fail_parent or ignore")
        data = codec.encode(node.payload)
        total[1] += len(data)
        if total[1] > MAX_PAYLOAD:
            raise InvalidArgument(
                "payload",
                f"<{total[1]} bytes>",
                f"a flow's payloads encode to at most {MAX_PAYLOAD} bytes",
            )
        group = DEFAULT_GROUP if node.lane is None else validate_group(node.lane)
        job_id = mint() if node.id is None else _ids.validate(node.id, "JOB", "job id")
        if job_id in seen:
            raise InvalidArgument("id", job_id, "a flow names each job once")
        seen.add(job_id)
        row = Node(
            job_id,
            data,
            group,
            "" if parent is None else parent.id,
            "" if parent is None or parent_queue == name else parent_queue,
            policy,
            (),
        )
        nodes = writes.setdefault(name, [])
        nodes.append(row)
        index = len(nodes) - 1
        kids = tuple(visit(child, name, row, name, depth + 1) for child in node.children)
        nodes[index] = replace(row, children=tuple(kid.id for kid in kids))
        return FlowIds(job_id, name, kids)

    ids = visit(flow, queue, None, queue, 0)
    return Plan(writes, ids)


def by_shard(laid: Plan, queue: str, tags: Sequence[str], shard_of: Callable[[str], int]) -> Plan:
    """``laid`` for a sharded ``queue`` (its shards' ``tags``, ``shard_of`` a lane's shard):
    its nodes written per shard, keyed by the shard's tag, and every node's ``parent_queue``
    the tag of its parent's shard (or its parent's queue) when that is not where the node is
    written, so a child tells its parent through the outbox relay. Writes go parents first:
    by the least depth of their nodes, in the order ``laid`` had them."""
    target: dict[str, str] = {}  # node id -> where it is written: a shard's tag or a queue
    parent_of: dict[str, str] = {}
    for name, nodes in laid.writes.items():
        for node in nodes:
            target[node.id] = tags[shard_of(node.group)] if name == queue else name
            if node.parent:
                parent_of[node.id] = node.parent
    depth: dict[str, int] = {}

    def depth_of(job_id: str) -> int:
        if job_id not in depth:
            parent = parent_of.get(job_id)
            depth[job_id] = 0 if parent is None else depth_of(parent) + 1
        return depth[job_id]

    writes: dict[str, list[Node]] = {}
    for nodes in laid.writes.values():
        for node in nodes:
            where = target[node.id]
            above = target[node.parent] if node.parent else where
            writes.setdefault(where, []).append(
                replace(node, parent_queue="" if above == where else above)
            )
    order = sorted(writes, key=lambda where: min(depth_of(n.id) for n in writes[where]))
    return Plan({where: writes[where] for where in order}, laid.ids)


def entry_args(entry: bytes) -> tuple[str, list[bytes]] | None:
    """An outbox entry as (the parent's queue, or its shard's tag on a sharded queue, and
    ``flow_deliver.lua``'s six ``ARGV`` values);
    None for one that is malformed (dropped: nothing could deliver it)."""
    parts = entry.split(b"\0", 6)
    if len(parts) != 7:
        return None
    parent_queue, parent, child, ok, policy, at, value = parts
    try:
        Keyspace.for_shard(text(parent_queue))  # a queue's name, or a shard's tag (q~k…)
    except InvalidArgument:
        return None
    return text(parent_queue), [parent, child, ok, policy, at, value]


def children_of(
    ids: bytes | None, results: Mapping[bytes, bytes], failed: Mapping[bytes, bytes], codec: Codec
) -> Children:
    """A parent's ``children`` field and its two hashes as :class:`Children`."""
    decoded = {text(k): (None if v == b"" else codec.decode(v)) for k, v in results.items()}
    return Children(
        tuple(text(ids).split()) if ids else (),
        decoded,
        {text(k): text(v) for k, v in failed.items()},
    )


def grouped(
    entries: Iterable[bytes],
) -> tuple[dict[str, list[tuple[bytes, list[bytes]]]], list[bytes]]:
    """Outbox entries by parent queue, each with its raw entry; and the malformed ones."""
    by_queue: dict[str, list[tuple[bytes, list[bytes]]]] = {}
    bad: list[bytes] = []
    for entry in entries:
        parsed = entry_args(entry)
        if parsed is None:
            bad.append(entry)
        else:
            by_queue.setdefault(parsed[0], []).append((entry, parsed[1]))
    return by_queue, bad

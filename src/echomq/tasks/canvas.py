"""Flows of tasks: :func:`chain` (each link after the one before, given its result),
:func:`group` (calls side by side, then a callback given every result) and the general
:func:`flow` (a parent task that reads its children's results through ``context().children``).

Each builds a :class:`TaskFlow`, a tree of bound calls; ``await taskflow.enqueue()`` admits it
as one engine flow (``Queue.add_flow``: atomic per queue) and returns the root's handle, whose
result is the flow's. A link or callback *receives* the result into its first parameter: bind
the rest with ``task.receiving(...)`` (a bare task receives it alone).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from echomq.engine.flows import MAX_FLOW_DEPTH, MAX_FLOW_NODES, FailurePolicy, Flow, FlowIds
from echomq.engine.results import Verdict
from echomq.errors import InvalidArgument, shown
from echomq.tasks.handle import Handle
from echomq.tasks.task import Call, Task

if TYPE_CHECKING:
    from echomq.tasks.app import App

R = TypeVar("R")
#: How a receiving node takes its children's results: the one child's, or all in flow order.
Gather = Literal["one", "all"]


@dataclass(frozen=True, slots=True)
class TaskFlow(Generic[R]):
    """A parent call and the children (calls, or flows of their own) it waits for.

    ``on_failure`` is what the death of each direct child does to the parent: ``fail_parent``
    (the parent is dead, its error names the child) or ``ignore`` (the parent runs; the child's
    result is None and its error is in ``context().children.failed``). ``gather`` says how the
    parent's receiving parameter is filled (None: the parent reads ``context().children``).
    """

    parent: Call[R]
    children: tuple[TaskFlow[Any] | Call[Any], ...]
    on_failure: FailurePolicy = "fail_parent"
    gather: Gather | None = None
    #: Levels below the parent (1: calls only) and nodes in all, counted as it is built (no
    #: walk of the tree), so a flow the engine would refuse is refused here, at any depth.
    depth: int = field(init=False, repr=False, compare=False)
    nodes: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Built by chain/group/flow, or by hand: the same checks either way, here.
        if not isinstance(self.parent, Call):
            raise InvalidArgument("parent", self.parent, "must be task.call(...)")
        if not isinstance(self.children, tuple | list):
            raise InvalidArgument("children", self.children, "must be a tuple of calls or flows")
        object.__setattr__(self, "children", tuple(_call(c, "children") for c in self.children))
        _policy(self.on_failure)
        if self.gather not in (None, "one", "all"):
            raise InvalidArgument("gather", self.gather, "must be None, 'one' or 'all'")
        kids = [child for child in self.children if isinstance(child, TaskFlow)]
        object.__setattr__(self, "depth", 1 + max((kid.depth for kid in kids), default=0))
        nodes = 1 + len(self.children) - len(kids) + sum(kid.nodes for kid in kids)
        object.__setattr__(self, "nodes", nodes)

    async def enqueue(self) -> FlowHandle[R]:
        """Admit the whole flow (its root task's app); the root's handle, with every id."""
        return await self.parent.task.app.enqueue_flow(self)


class FlowHandle(Handle[R]):
    """The root's :class:`Handle` (its ``result()`` is the flow's), and ``ids``: every node's."""

    __slots__ = ("ids",)

    def __init__(self, handle: Handle[R], ids: FlowIds) -> None:
        super().__init__(handle.task, handle.verdict, handle.queue, handle.ran, handle.ran_lines)
        self.ids = ids


def _link(link: Any, argument: str) -> Call[Any]:
    """A receiving node: a bare task (it receives the result alone) or ``task.receiving()``."""
    if isinstance(link, Task):
        return link.receiving()
    if isinstance(link, Call) and link.receive is not None:
        return link
    raise InvalidArgument(
        argument, link, "must be a task, or task.receiving(...): it receives the result"
    )


def _call(call: Any, argument: str) -> TaskFlow[Any] | Call[Any]:
    if isinstance(call, TaskFlow | Call):
        return call
    raise InvalidArgument(argument, call, "must be task.call(...) or a flow")


def _calls(calls: Any, argument: str) -> tuple[TaskFlow[Any] | Call[Any], ...]:
    """Each of ``calls`` checked, at most a flow's node count of them (a generator may not end)."""
    if isinstance(calls, str | bytes | TaskFlow | Call) or not isinstance(calls, Iterable):
        raise InvalidArgument(argument, shown(calls, 80), "must be a sequence of calls or flows")
    found: list[TaskFlow[Any] | Call[Any]] = []
    for call in calls:
        if len(found) == MAX_FLOW_NODES:
            raise InvalidArgument(argument, f"<over {len(found)}>", _too_big)
        found.append(_call(call, argument))
    if not found:
        raise InvalidArgument(argument, (), "needs at least one call or flow")
    return tuple(found)


_too_big = f"a flow nests at most {MAX_FLOW_DEPTH} levels below its root, {MAX_FLOW_NODES} nodes"


def _policy(on_failure: Any) -> FailurePolicy:
    if on_failure not in ("fail_parent", "ignore") or not isinstance(on_failure, str):
        raise InvalidArgument("on_failure", on_failure, "must be 'fail_parent' or 'ignore'")
    return on_failure  # type: ignore[return-value]


def _bounded(node: TaskFlow[R], argument: str) -> TaskFlow[R]:
    """``node``, unless it nests deeper or holds more nodes than a flow may."""
    if node.depth > MAX_FLOW_DEPTH or node.nodes > MAX_FLOW_NODES:
        raise InvalidArgument(argument, f"<{node.depth} deep, {node.nodes} nodes>", _too_big)
    return node


def chain(first: Call[Any] | TaskFlow[Any], *links: Task[Any, Any] | Call[Any]) -> TaskFlow[Any]:
    """``first``, then each link in turn, each given the result of the one before into its
    first parameter (``chain(a.call(1), b, c.receiving(y=2))``: ``c(b(a(1)), y=2)``). A link
    that dies fails every link after it."""
    if not links:
        raise InvalidArgument("links", links, "a chain needs at least one link after the first")
    node: TaskFlow[Any] | Call[Any] = _call(first, "first")
    below = node.depth if isinstance(node, TaskFlow) else 0
    if below + len(links) > MAX_FLOW_DEPTH:  # each link is a level: refused before building
        raise InvalidArgument(
            "links", f"<{len(links)} links>", f"{_too_big} (a chain: a level per link)"
        )
    for link in links:
        node = TaskFlow(_link(link, "links"), (node,), "fail_parent", "one")
    assert isinstance(node, TaskFlow)
    return _bounded(node, "links")


def group(
    calls: Iterable[Call[Any] | TaskFlow[Any]],
    *,
    then: Task[Any, R] | Call[R],
    on_failure: FailurePolicy = "fail_parent",
) -> TaskFlow[R]:
    """``calls`` run side by side; ``then`` runs once all are done, given the list of their
    results (in the order given) into its first parameter. With ``on_failure="ignore"`` a
    dead call's place in the list is None."""
    children = _calls(calls, "calls")
    return _bounded(TaskFlow(_link(then, "then"), children, on_failure, "all"), "calls")


def flow(
    parent: Call[R],
    children: Sequence[Call[Any] | TaskFlow[Any]],
    *,
    on_failure: FailurePolicy = "fail_parent",
) -> TaskFlow[R]:
    """``parent`` runs once every child is done; it reads their results through
    ``echomq.context().children`` (a :class:`Children`: by id, or ``ordered()``). A child
    may be a flow of its own (grandchildren)."""
    if not isinstance(parent, Call):
        raise InvalidArgument("parent", parent, "must be task.call(...)")
    kids = _calls(children, "children")
    return _bounded(TaskFlow(parent, kids, on_failure, None), "children")


def engine_flow(node: TaskFlow[Any] | Call[Any], policy: FailurePolicy = "fail_parent") -> Flow:
    """The engine's :class:`Flow` of a task flow: payloads ``{"task", "args"}``, a parent's
    with ``"flow": 1`` (the worker reads its children first) and, when it receives a result,
    ``"receive": [parameter, "one" | "all"]``. ``policy`` is the node's own, from its parent."""
    call = node.parent if isinstance(node, TaskFlow) else node
    options, task = call.options, call.task.defaults  # a call's own, not its task's
    for name in ("dedup_key", "delay", "at", "result_ttl", "priority", "cost"):
        value = getattr(options, name)
        if value is not None and value != getattr(task, name):
            raise InvalidArgument(name, value, "a flow's calls take no " + name)
    payload: dict[str, Any] = {"task": call.task.name, "args": call.args}
    children: list[Flow] = []
    if isinstance(node, TaskFlow):
        payload["flow"] = 1
        if node.gather is not None and call.receive is not None:
            payload["receive"] = [call.receive, node.gather]
        children = [engine_flow(child, node.on_failure) for child in node.children]
    elif call.receive is not None:
        raise InvalidArgument("calls", call, "a receiving call needs something before it")
    return Flow(payload, children, call.task.queue, call.lane, call.id, policy)


def calls_of(node: TaskFlow[Any] | Call[Any]) -> list[Call[Any]]:
    """Every call of a task flow, parents first."""
    if isinstance(node, Call):
        return [node]
    out = [node.parent]
    for child in node.children:
        out += calls_of(child)
    return out


def checked(taskflow: Any) -> Flow:
    """The engine's flow of ``taskflow``, every check done (live and eager runs alike)."""
    if not isinstance(taskflow, TaskFlow):
        raise InvalidArgument("flow", taskflow, "must be built by chain, group or flow")
    return engine_flow(_bounded(taskflow, "flow"))


async def enqueue(app: App, taskflow: TaskFlow[R]) -> FlowHandle[R]:
    """Admit ``taskflow`` on its root's queue; the root's handle, with every id."""
    spec = checked(taskflow)
    root = taskflow.parent
    queue = await app.open_queue(root.task.queue)
    for call in calls_of(taskflow):
        await app.producer.configure_lane(await app.open_queue(call.task.queue), call)
    ids = await queue.add_flow(spec, carries_context=True)  # its payloads are ours
    handle = Handle(root.task, Verdict(ids.kind, ids.id), queue)
    return FlowHandle(handle, ids)

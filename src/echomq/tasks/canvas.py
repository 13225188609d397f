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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from echomq.engine.flows import FailurePolicy, Flow, FlowIds
from echomq.engine.results import Verdict
from echomq.errors import InvalidArgument
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

    async def enqueue(self) -> FlowHandle[R]:
        """Admit the whole flow (its root task's app); the root's handle, with every id."""
        return await self.parent.task.app.enqueue_flow(self)


class FlowHandle(Handle[R]):
    """The root's :class:`Handle` (its ``result()`` is the flow's), and ``ids``: every node's."""

    __slots__ = ("ids",)

    def __init__(self, handle: Handle[R], ids: FlowIds) -> None:
        super().__init__(handle.task, handle.verdict, handle._queue, handle._info, handle._lines)
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


def chain(first: Call[Any] | TaskFlow[Any], *links: Task[Any, Any] | Call[Any]) -> TaskFlow[Any]:
    """``first``, then each link in turn, each given the result of the one before into its
    first parameter (``chain(a.call(1), b, c.receiving(y=2))``: ``c(b(a(1)), y=2)``). A link
    that dies fails every link after it."""
    if not links:
        raise InvalidArgument("links", links, "a chain needs at least one link after the first")
    node: TaskFlow[Any] | Call[Any] = _call(first, "first")
    for link in links:
        node = TaskFlow(_link(link, "links"), (node,), "fail_parent", "one")
    assert isinstance(node, TaskFlow)
    return node


def group(
    calls: Iterable[Call[Any] | TaskFlow[Any]],
    *,
    then: Task[Any, R] | Call[R],
    on_failure: FailurePolicy = "fail_parent",
) -> TaskFlow[R]:
    """``calls`` run side by side; ``then`` runs once all are done, given the list of their
    results (in the order given) into its first parameter. With ``on_failure="ignore"`` a
    dead call's place in the list is None."""
    children = tuple(_call(call, "calls") for call in calls)
    if not children:
        raise InvalidArgument("calls", children, "a group needs at least one call")
    return TaskFlow(_link(then, "then"), children, on_failure, "all")


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
    kids = tuple(_call(child, "children") for child in children)
    if not kids:
        raise InvalidArgument("children", kids, "a flow needs at least one child")
    return TaskFlow(parent, kids, on_failure, None)


def engine_flow(node: TaskFlow[Any] | Call[Any], policy: FailurePolicy = "fail_parent") -> Flow:
    """The engine's :class:`Flow` of a task flow: payloads ``{"task", "args"}``, a parent's
    with ``"flow": 1`` (the worker reads its children first) and, when it receives a result,
    ``"receive": [parameter, "one" | "all"]``. ``policy`` is the node's own, from its parent."""
    call = node.parent if isinstance(node, TaskFlow) else node
    for name in ("dedup_key", "delay", "at", "result_ttl"):
        if getattr(call, name) is not None:
            raise InvalidArgument(name, getattr(call, name), "a flow's calls take no " + name)
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


async def enqueue(app: App, taskflow: TaskFlow[R]) -> FlowHandle[R]:
    """Admit ``taskflow`` on its root's queue; the root's handle, with every id."""
    if not isinstance(taskflow, TaskFlow):
        raise InvalidArgument("flow", taskflow, "must be built by chain, group or flow")
    spec = engine_flow(taskflow)
    root = taskflow.parent
    queue = await app._open_queue(root.task.queue)
    for call in calls_of(taskflow):
        await app._configure_lane(await app._open_queue(call.task.queue), call)
    ids = await queue.add_flow(spec)
    handle = Handle(root.task, Verdict(ids.kind, ids.id), queue)
    return FlowHandle(handle, ids)

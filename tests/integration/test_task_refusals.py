"""The task layer's refusals, against a real Valkey: every bad value a declaration, a canvas, a
call or a read is given is an ``InvalidArgument`` naming the argument (never a ``TypeError``
or a ``RecursionError``), and a refused call registers nothing and writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

import pytest

from echomq import (
    App,
    AppWorker,
    InvalidArgument,
    Job,
    Queue,
    SyncQueue,
    TaskFailed,
    chain,
    flow,
    group,
)
from echomq.engine.flows import MAX_FLOW_DEPTH
from echomq.tasks import TaskFlow
from echomq.wire.codec import MAX_DEPTH


def nested(depth: int) -> Any:
    """A list ``depth`` levels deep (``[[[...]]]``), built without recursion."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


async def keys_named(queue: Queue, name: str) -> list[bytes]:
    """Every key of the server that names ``name`` (a queue's keys and its lanes')."""
    cursor, found = b"0", []
    while True:
        cursor, batch = await queue.wire.call("SCAN", cursor, "MATCH", f"*{name}*", "COUNT", 1000)
        found += batch
        if cursor in (b"0", 0, "0"):
            return sorted(found)


@pytest.fixture
async def app(valkey_url: str, queue_name: str) -> AsyncIterator[App]:
    app = App(valkey_url, queue=queue_name)
    await app.connect()
    yield app
    queue = app.queue()
    await queue.pause()
    await queue.obliterate(force=True)
    await app.close()


def declare(app: App) -> Any:
    @app.task
    async def first(n: object) -> object:
        return n

    @app.task
    async def link(previous: object) -> object:
        return previous

    return first, link


def refused(exc: pytest.ExceptionInfo[InvalidArgument], argument: str) -> None:
    assert exc.value.argument == argument, exc.value
    assert str(exc.value)  # the message is built: no RecursionError
    assert repr(exc.value)


async def test_a_chain_deeper_than_a_flow_nests_is_refused_naming_links(
    app: App, queue_name: str
) -> None:
    first, link = declare(app)
    with pytest.raises(InvalidArgument) as exc:
        chain(first.call(1), *[link] * 1_000)  # a RecursionError before the 32-level check
    refused(exc, "links")
    with pytest.raises(InvalidArgument) as exc:
        chain(first.call(1), *[link] * (MAX_FLOW_DEPTH + 1))
    refused(exc, "links")
    deepest = chain(first.call(1), *[link] * MAX_FLOW_DEPTH)
    with app.eager_mode():
        assert await (await deepest.enqueue()).result() == 1
    # Flows of flows count their levels too: a group over a full chain is one level too deep.
    with pytest.raises(InvalidArgument) as exc:
        group([deepest], then=link)
    refused(exc, "calls")
    with pytest.raises(InvalidArgument) as exc:
        flow(first.call(1), [deepest])
    refused(exc, "children")
    assert await keys_named(app.queue(), queue_name) == []


async def test_a_canvas_given_no_sequence_or_policy_names_the_argument(app: App) -> None:
    first, link = declare(app)
    cases: list[tuple[str, Any]] = [
        ("calls", lambda: group(3, then=link)),  # type: ignore[arg-type]
        ("children", lambda: flow(first.call(1), 3)),  # type: ignore[arg-type]
        ("on_failure", lambda: group([first.call(1)], then=link, on_failure="bogus")),
        ("on_failure", lambda: flow(first.call(1), [first.call(2)], on_failure=None)),
    ]
    for argument, build in cases:
        with pytest.raises(InvalidArgument) as exc:
            build()
        refused(exc, argument)


async def test_a_task_flow_built_by_hand_is_checked_as_one_built_by_chain(
    app: App, queue_name: str
) -> None:
    first, link = declare(app)
    cases: list[tuple[str, Any]] = [
        ("parent", lambda: TaskFlow(3, (first.call(1),))),  # type: ignore[arg-type]
        ("children", lambda: TaskFlow(link.receiving(), 3)),  # type: ignore[arg-type]
        ("children", lambda: TaskFlow(link.receiving(), (3,))),  # type: ignore[arg-type]
        ("gather", lambda: TaskFlow(link.receiving(), (first.call(1),), gather="x")),  # type: ignore[arg-type]
    ]
    for argument, build in cases:
        with pytest.raises(InvalidArgument) as exc:
            build()
        refused(exc, argument)
    with pytest.raises(InvalidArgument) as exc:  # nested: eager mode once took it for "ignore"
        TaskFlow(link.receiving(), (TaskFlow(link.receiving(), (first.call(1),), "x"),))  # type: ignore[arg-type]
    refused(exc, "on_failure")
    assert await keys_named(app.queue(), queue_name) == []


async def test_a_deeply_nested_task_argument_is_refused_naming_args(
    app: App, queue_name: str
) -> None:
    first, _ = declare(app)
    # An argument sits two levels down its payload ({"args": {"n": ...}}): it keeps the rest.
    for depth in (5_000, MAX_DEPTH - 1):
        with pytest.raises(InvalidArgument) as exc:
            await first.enqueue(nested(depth))
        refused(exc, "args")
        with pytest.raises(InvalidArgument) as exc:
            first.call({"a": nested(depth - 1)})
        refused(exc, "args")
    assert await keys_named(app.queue(), queue_name) == []
    # At the bound it is carried, live and eager.
    assert (await first.enqueue(nested(MAX_DEPTH - 2))).verdict.kind == "enqueued"
    with app.eager_mode():
        eager = await first.enqueue(nested(MAX_DEPTH - 2))
        assert await eager.result() == nested(MAX_DEPTH - 2)


async def test_a_task_argument_json_cannot_carry_is_refused_as_args(
    app: App, queue_name: str
) -> None:
    first, _ = declare(app)
    for value in (b"bytes", {1, 2}, float("nan"), {"k": "\ud800"}):
        with pytest.raises(InvalidArgument) as exc:  # the codec's "payload", which none passed
            await first.enqueue(value)
        refused(exc, "args")
        with app.eager_mode(), pytest.raises(InvalidArgument) as exc:
            await first.enqueue(value)
        refused(exc, "args")
    assert await keys_named(app.queue(), queue_name) == []


async def test_the_codec_bounds_nesting_the_same_at_any_stack_depth(queue: Queue) -> None:
    async def at_depth(frames: int) -> None:
        if frames:
            return await at_depth(frames - 1)
        await queue.enqueue(nested(MAX_DEPTH))

    await at_depth(700)  # in a deep call stack the bound is the same, not the interpreter's
    for depth in (MAX_DEPTH + 1, 5_000):
        before = await keys_named(queue, queue.name)
        with pytest.raises(InvalidArgument) as exc:
            await queue.enqueue(nested(depth))
        refused(exc, "payload")
        assert await keys_named(queue, queue.name) == before
    assert await queue.enqueue({"ok": [1, 2, {"b": "[[[[[["}]})


async def test_progress_refuses_a_log_that_is_no_lines_and_a_deep_value(queue: Queue) -> None:
    await queue.enqueue("x")
    job = await queue.claim(lease=60)
    assert isinstance(job, Job)
    before = await keys_named(queue, queue.name)
    for options, argument in [
        ({"log": 3.5}, "log"),
        ({"log": None}, "log"),
        ({"log": [b"bytes"]}, "log"),
        ({"log": "\ud800"}, "log"),  # a lone surrogate: no UTF-8 for the wire
        ({"value": {"k": "\udfff"}}, "value"),
        ({"value": nested(5_000)}, "value"),
        ({"value": nested(MAX_DEPTH + 1)}, "value"),
    ]:
        with pytest.raises(InvalidArgument) as exc:
            await queue.progress(job, **options)
        refused(exc, argument)
    assert await keys_named(queue, queue.name) == before


async def test_reads_refuse_an_id_of_another_kind(valkey_url: str, queue: Queue) -> None:
    other = "PLR0KHTOWnGLuC"  # well-formed, but a player's id, not a job's
    reads = [
        lambda: queue.state(other),
        lambda: queue.job(other),
        lambda: queue.wait(other, 0.1),
        lambda: queue.children(other),
    ]
    for read in reads:
        with pytest.raises(InvalidArgument) as exc:
            await read()
        refused(exc, "job id")
    sync = SyncQueue.connect(valkey_url, queue.name)
    try:
        for call in (sync.state, sync.job, sync.wait):
            with pytest.raises(InvalidArgument) as exc:
                await asyncio.to_thread(call, other)
            refused(exc, "job id")
    finally:
        sync.close()


async def test_a_refused_periodic_declaration_registers_nothing(app: App) -> None:
    async def beat(n: int = 0) -> None:
        return None

    cases: list[tuple[str, dict[str, Any]]] = [
        ("kwargs", {"every": 60, "kwargs": {1: 2}}),
        ("args", {"every": 60, "kwargs": {"missing": 2}}),
        ("args", {"every": 60, "args": (nested(5_000),)}),
        ("args", {"every": 60, "args": "ab"}),
    ]
    for argument, options in cases:
        with pytest.raises(InvalidArgument) as exc:
            app.periodic(**options)(beat)
        refused(exc, argument)
        assert app.tasks == {}
        assert app.schedules == {}


async def test_task_options_are_checked_at_declaration_and_register_nothing(app: App) -> None:
    async def job(n: int) -> int:
        return n

    cases: list[tuple[str, dict[str, Any]]] = [
        ("queue name", {"queue": ""}),
        ("queue name", {"queue": 3}),
        ("bogus", {"bogus": 1}),
        ("backoff", {"backoff": "fast"}),
        ("lane_rate", {"lane_rate": (5, "x")}),
        ("lane_rate", {"lane_rate": [5, 1.0]}),
    ]
    for argument, options in cases:
        with pytest.raises(InvalidArgument) as exc:
            app.task(**options)(job)
        refused(exc, argument)
        assert app.tasks == {}


async def test_an_eager_handle_checks_its_arguments_as_a_live_one(app: App) -> None:
    first, _ = declare(app)
    with app.eager_mode():
        handle = await first.enqueue(1)
    for argument, call in [
        ("limit", lambda: handle.logs("x")),
        ("limit", lambda: handle.logs(-5)),
        ("timeout", lambda: handle.result(timeout="x")),
        ("reason", lambda: handle.cancel(reason=3)),
    ]:
        with pytest.raises(InvalidArgument) as exc:
            await call()
        refused(exc, argument)


class Sized(Protocol):  # not runtime_checkable: isinstance() with it raises TypeError
    def size(self) -> int: ...


async def test_a_parameter_annotated_any_or_a_protocol_takes_any_value(app: App) -> None:
    @app.task
    async def anything(value: Any, shape: Sized | None = None) -> Any:
        return value

    with app.eager_mode():  # a TypeError from isinstance(value, Any) on Python 3.11+
        assert await (await anything.enqueue({"a": 1})).result() == {"a": 1}
    assert (await anything.enqueue([1, "x"], None)).verdict.kind == "enqueued"


async def test_enqueue_many_refuses_what_is_no_iterable_of_calls(app: App, queue_name: str) -> None:
    first, _ = declare(app)
    for calls in (3, None, first.call(1), "calls"):
        with pytest.raises(InvalidArgument) as exc:
            await app.enqueue_many(calls)  # type: ignore[arg-type]
        refused(exc, "calls")
    assert await keys_named(app.queue(), queue_name) == []


async def test_text_with_a_lone_surrogate_is_refused_or_replaced_never_a_unicode_error(
    queue: Queue,
) -> None:
    await queue.enqueue("x")
    job = await queue.claim(lease=60)
    assert isinstance(job, Job)
    before = await keys_named(queue, queue.name)
    with pytest.raises(InvalidArgument) as exc:
        await queue.cancel(job.id, "\ud800")
    refused(exc, "reason")
    assert await keys_named(queue, queue.name) == before
    # A retry is never lost to its text: the error is kept, its surrogate replaced.
    assert await queue.retry(job, error="bad \ud800 decode", delay=0)
    info = await queue.job(job.id)
    assert info is not None
    assert info.last_error == "bad ? decode"


async def test_app_and_worker_declarations_name_a_bad_argument(valkey_url: str, app: App) -> None:
    cases: list[tuple[str, Any]] = [
        ("url", lambda: App(3)),  # type: ignore[arg-type]
        ("url", lambda: App(b"valkey://127.0.0.1")),  # type: ignore[arg-type]
        ("codec", lambda: App(valkey_url, codec=3)),  # type: ignore[arg-type]
        ("queue name", lambda: app.sync_queue([])),  # type: ignore[arg-type]
        ("app", lambda: AppWorker({})),  # type: ignore[arg-type]
        ("queues", lambda: AppWorker(app, "default")),  # seven queues of one letter each
        ("queues", lambda: AppWorker(app, 3)),  # type: ignore[arg-type]
        ("queue name", lambda: AppWorker(app, ["a", 1])),  # type: ignore[list-item]
        ("options", lambda: AppWorker(app, options=3)),  # type: ignore[arg-type]
        ("metronome", lambda: AppWorker(app, metronome="m")),  # type: ignore[arg-type]
    ]
    for argument, build in cases:
        with pytest.raises(InvalidArgument) as exc:
            build()
        refused(exc, argument)


async def test_a_result_nested_past_the_bound_fails_its_job_naming_result(app: App) -> None:
    @app.task(retries=0)
    async def deep() -> Any:
        return nested(MAX_DEPTH + 1)

    with app.eager_mode():
        handle = await deep.enqueue()
    with pytest.raises(TaskFailed, match=r"invalid result .* nests deeper than 128 levels"):
        await handle.result()

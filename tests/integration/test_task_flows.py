"""Flows of tasks against a real Valkey: a chain hands each result to the next link, a group's
callback gets every result, a general flow's parent reads ``context().children``; policies,
grandchildren, a child on another queue, and eager mode running the same flows inline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest

from echomq import (
    App,
    AppWorker,
    ConsumerOptions,
    Fixed,
    InvalidArgument,
    TaskFailed,
    chain,
    context,
    flow,
    group,
)

FAST = ConsumerOptions(beat=0.1, backoff=Fixed(0.0))


async def forget(app: App) -> None:
    for name in list(app._queues):
        queue = app.queue(name)
        await queue.pause()
        await queue.obliterate(force=True)
    await app.close()


@pytest.fixture
async def app(valkey_url: str, queue_name: str) -> AsyncIterator[App]:
    app = App(valkey_url, queue=queue_name)
    await app.connect()
    yield app
    await forget(app)


def tasks(app: App, other_queue: str | None = None) -> SimpleNamespace:
    @app.task
    async def fetch(n: int) -> int:
        return n * 10

    @app.task(queue=other_queue)
    async def far(n: int) -> int:
        return n + 1000

    @app.task(retries=0)
    async def broken(n: int) -> int:
        raise ValueError(f"broken {n}")

    @app.task
    async def add(previous: int, extra: int = 0) -> int:
        return previous + extra

    @app.task
    async def total(results: list[int | None]) -> int:
        return sum(r for r in results if r is not None)

    @app.task
    async def report(title: str) -> dict[str, object]:
        children = context().children
        assert children is not None
        return {"title": title, "ordered": children.ordered(), "failed": len(children.failed)}

    return SimpleNamespace(**locals())


async def test_a_chain_hands_each_result_to_the_next_link(app: App) -> None:
    t = tasks(app)
    handle = await chain(t.fetch.call(4), t.add, t.add.receiving(extra=2)).enqueue()
    assert handle.verdict.kind == "enqueued"
    assert len(handle.ids.ids) == 3
    await AppWorker(app, options=FAST).run_until_idle()
    assert await handle.result(timeout=5) == 42


async def test_a_group_calls_back_with_every_result_in_order(app: App) -> None:
    t = tasks(app)
    handle = await group([t.fetch.call(n) for n in (1, 2, 3)], then=t.total).enqueue()
    await AppWorker(app, options=FAST).run_until_idle()
    assert await handle.result(timeout=5) == 60


async def test_a_group_member_that_dies_fails_the_callback_or_is_ignored(app: App) -> None:
    t = tasks(app)
    calls = [t.fetch.call(1), t.broken.call(2)]
    failing = await group(calls, then=t.total).enqueue()
    ignoring = await group(
        [t.fetch.call(1), t.broken.call(2)],
        then=t.total,
        on_failure="ignore",
    ).enqueue()
    await AppWorker(app, options=FAST).run_until_idle()
    with pytest.raises(TaskFailed, match=r"child JOB\w+ failed: ValueError: broken 2"):
        await failing.result(timeout=5)
    assert await ignoring.result(timeout=5) == 10


async def test_a_parent_reads_its_children_grandchildren_included(app: App) -> None:
    t = tasks(app)
    inner = group([t.fetch.call(1), t.fetch.call(2)], then=t.total)
    handle = await flow(
        t.report.call("r"),
        [inner, t.fetch.call(5), t.broken.call(0)],
        on_failure="ignore",
    ).enqueue()
    await AppWorker(app, options=FAST).run_until_idle()
    assert await handle.result(timeout=5) == {"title": "r", "ordered": [30, 50, None], "failed": 1}


async def test_a_child_task_on_another_queue_reaches_its_parent(app: App, queue_name: str) -> None:
    t = tasks(app, queue_name + "-far")
    handle = await group(
        [t.far.call(1), t.fetch.call(1)],
        then=t.total,
    ).enqueue()
    assert [c.queue for c in handle.ids.children] == [queue_name + "-far", queue_name]
    await AppWorker(app, options=FAST).run_until_idle()
    assert await handle.result(timeout=5) == 1011


async def test_flows_are_checked_before_any_write(app: App) -> None:
    t = tasks(app)
    with pytest.raises(InvalidArgument, match="receives the result"):
        chain(t.fetch.call(1), t.fetch.call(2))
    with pytest.raises(InvalidArgument) as refused:
        await chain(t.fetch.using(delay=5).call(1), t.add).enqueue()
    assert refused.value.argument == "delay"
    with pytest.raises(InvalidArgument) as refused:
        await chain(t.fetch.using(cost=2).call(1), t.add).enqueue()
    assert refused.value.argument == "cost"  # a flow's nodes cost 1
    with pytest.raises(InvalidArgument, match="'previous' receives the result"):
        t.add.receiving(previous=1)
    with pytest.raises(InvalidArgument):
        group([], then=t.total)
    assert await app.queue().wire.call("KEYS", app.queue().keys.root + "*") == []


async def test_eager_mode_runs_a_flow_inline_children_first(app: App) -> None:
    t = tasks(app)
    with app.eager_mode():
        chained = await chain(t.fetch.call(4), t.add.receiving(extra=2)).enqueue()
        grouped = await group(
            [t.fetch.call(1), t.broken.call(1)],
            then=t.total,
        ).enqueue()
    assert await chained.result() == 42
    with pytest.raises(TaskFailed, match="failed: ValueError: broken 1"):
        await grouped.result()

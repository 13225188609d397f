"""Batch tasks without a server: the bounds of a declaration, each refused naming its argument;
a batch task's queue is its own; eager mode runs each member as a batch of one."""

from __future__ import annotations

import math
from typing import Any

import pytest

from echomq import App, Batching, InvalidArgument, Member, TaskFailed
from echomq.tasks import BatchTask, MemberVerdict


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"max_size": 0, "max_wait": 1.0}, "max_size"),
        ({"max_size": 10_001, "max_wait": 1.0}, "max_size"),
        ({"max_size": True, "max_wait": 1.0}, "max_size"),
        ({"max_size": 10, "max_wait": 0.0}, "max_wait"),
        ({"max_size": 10, "max_wait": 301.0}, "max_wait"),
        ({"max_size": 10, "max_wait": math.nan}, "max_wait"),
        ({"max_size": 10, "max_wait": 1.0, "min_size": 11}, "min_size"),
        ({"max_size": 10, "max_wait": 1.0, "min_size": 0}, "min_size"),
        ({"max_size": 10, "max_wait": 1.0, "concurrency": 0}, "concurrency"),
    ],
)
def test_batching_bounds_are_checked_naming_the_argument(
    options: dict[str, Any], argument: str
) -> None:
    with pytest.raises(InvalidArgument) as refused:
        Batching(**options)
    assert refused.value.argument == argument


def test_min_size_defaults_to_max_size() -> None:
    assert Batching(max_size=50, max_wait=1.0).least == 50
    assert Batching(max_size=50, max_wait=1.0, min_size=5).least == 5


def test_a_batch_task_has_a_queue_of_its_own() -> None:
    app = App(queue="jobs")

    @app.task
    async def single(x: int) -> None: ...

    with pytest.raises(InvalidArgument) as refused:

        @app.task(batch=Batching(max_size=5, max_wait=1.0))
        async def batched(members: list[Member[int]]) -> None: ...

    assert refused.value.argument == "queue"

    @app.task(queue="bulk", batch=Batching(max_size=5, max_wait=1.0))
    async def bulk(members: list[Member[int]]) -> None: ...

    assert isinstance(bulk, BatchTask)
    with pytest.raises(InvalidArgument) as again:

        @app.task(queue="bulk")
        async def other(x: int) -> None: ...

    assert again.value.argument == "queue"


def test_a_batch_handler_takes_one_parameter_and_a_bad_batch_is_refused() -> None:
    app = App()
    with pytest.raises(InvalidArgument) as refused:

        @app.task(batch=Batching(max_size=5, max_wait=1.0))
        async def two(members: list[Member[int]], extra: int) -> None: ...

    assert refused.value.argument == "fn"
    with pytest.raises(InvalidArgument) as wrong:
        app.task(batch=(5, 1.0))(_noop)  # type: ignore[call-overload]
    assert wrong.value.argument == "batch"


async def _noop(members: list[Member[int]]) -> None: ...


def test_member_verdicts_check_their_values() -> None:
    member = Member("JOB0000000000A", 3)
    assert member.done(6) == MemberVerdict("JOB0000000000A", "done", 6)
    assert member.retry(2.0).delay == 2.0
    with pytest.raises(InvalidArgument) as delay:
        member.retry(-1.0)
    assert delay.value.argument == "delay"
    with pytest.raises(InvalidArgument) as reason:
        member.dead("")
    assert reason.value.argument == "reason"


async def test_eager_mode_runs_each_member_as_a_batch_of_one() -> None:
    app = App(queue="eager")
    seen: list[list[int]] = []

    @app.task(batch=Batching(max_size=100, max_wait=2.0))
    async def double(members: list[Member[int]]) -> list[MemberVerdict[int]]:
        seen.append([m.item for m in members])
        return [m.done(m.item * 2) if m.item >= 0 else m.dead("negative") for m in members]

    with app.eager_mode():
        good = await double.enqueue(21)
        bad = await double.enqueue(-1)
    assert seen == [[21], [-1]]
    assert await good.result() == 42
    with pytest.raises(TaskFailed) as failed:
        await bad.result()
    assert "negative" in failed.value.error


async def test_a_batch_task_called_directly_runs_a_batch_of_one() -> None:
    app = App(queue="direct")

    @app.task(batch=Batching(max_size=10, max_wait=1.0))
    async def square(members: list[Member[int]]) -> list[MemberVerdict[int]]:
        return [m.done(m.item * m.item) for m in members]

    assert await square(7) == 49

"""The task layer without a server: registration, argument checks, eager mode (context, hooks,
the JSON round trip, failures), and what mypy sees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from echomq import App, InvalidArgument, TaskFailed, context
from echomq.errors import Closed

ROOT = Path(__file__).resolve().parents[2]


def test_registration_refuses_sync_functions_duplicate_names_and_unknown_parameters() -> None:
    app = App(queue="q")

    @app.task(name="one")
    async def one(x: int) -> int:
        return x

    assert one.name == "one"
    assert app.tasks == {"one": one}
    with pytest.raises(InvalidArgument, match="another task of this app has that name"):
        app.task(name="one")(one.fn)
    with pytest.raises(InvalidArgument, match="must be an async function"):
        app.task(lambda: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(InvalidArgument, match="must name a parameter"):

        @app.task(lane="tenant")
        async def no_tenant(x: int) -> None: ...

    with pytest.raises(InvalidArgument, match="invalid retries -1"):

        @app.task(retries=-1)
        async def negative() -> None: ...

    with pytest.raises(InvalidArgument, match="invalid result_ttl"):
        App(result_ttl=31 * 86400)


async def test_a_task_called_directly_is_the_plain_function() -> None:
    app = App()

    @app.task
    async def double(x: int) -> int:
        return 2 * x

    assert await double(21) == 42
    assert double.name == "test_a_task_called_directly_is_the_plain_function.<locals>.double"
    with pytest.raises(Closed, match="not connected"):
        app.queue()


async def test_eager_mode_runs_the_task_inline_with_its_context_and_hooks() -> None:
    app = App(queue="eager")
    app.state["greeting"] = "hello"
    seen: list[str] = []

    @app.before_job
    async def before(ctx: object) -> None:
        seen.append("before")

    @app.after_job
    async def after(ctx: object, outcome: object) -> None:
        seen.append(f"after ok={getattr(outcome, 'ok', None)}")

    @app.task(lane="name")
    async def greet(name: str, times: int = 1) -> str:
        ctx = context()
        assert (ctx.attempt, ctx.task, ctx.job.lane) == (1, greet.name, name)
        return f"{ctx.state['greeting']} {name}" * times

    with app.eager_mode():
        handle = await greet.enqueue("ada", times=2)
        batch = await app.enqueue_many([greet.call("bob"), greet.call("cy")])
    assert handle.verdict.kind == "enqueued"
    assert await handle.result() == "hello adahello ada"
    assert [await h.result() for h in batch] == ["hello bob", "hello cy"]
    status = await handle.status()
    assert status is not None
    assert (status.state, status.payload["args"]) == ("completed", {"name": "ada", "times": 2})
    assert seen == ["before", "after ok=True"] * 3
    assert app.eager is False  # the block put it back
    with pytest.raises(LookupError, match="only available inside a running task"):
        context()


async def test_eager_failures_raise_from_result_or_from_the_enqueue_with_propagate() -> None:
    app = App()

    @app.task
    async def broken(x: int) -> None:
        raise ValueError(f"bad {x}")

    with app.eager_mode():
        handle = await broken.enqueue(1)
        with pytest.raises(TaskFailed, match="ValueError: bad 1") as failed:
            await handle.result()
        assert failed.value.traceback is not None
        assert "raise ValueError" in failed.value.traceback
        with pytest.raises(InvalidArgument, match="parameter 'x' expects int, got str"):
            await broken.enqueue("one")  # type: ignore[arg-type]
    with app.eager_mode(propagate=True), pytest.raises(ValueError, match="bad 2"):
        await broken.enqueue(2)


def test_eager_mode_serves_blocking_producers_too() -> None:
    app = App()

    @app.task
    async def square(x: float) -> float:
        return x * x

    app.eager = True
    assert square.enqueue_sync(3).result() == 9
    assert square.enqueue_sync(1.5).result() == 2.25


SNIPPET = """
from echomq import App

app = App()

@app.task
async def send_email(tenant: str, to: str) -> int:
    return 1

async def main() -> None:
    handle = await send_email.enqueue("acme", 3)
    count: int = await handle.result()
    name: str = await handle.result()
"""


def test_mypy_sees_a_wrong_argument_type_and_the_result_type(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(snippet)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    errors = [
        line.split(": error: ", 1)[1] for line in done.stdout.splitlines() if ": error: " in line
    ]
    assert errors == [
        'Argument 2 to "enqueue" of "Task" has incompatible type "int"; expected "str"  [arg-type]',
        'Incompatible types in assignment (expression has type "int", variable has type "str")  '
        "[assignment]",
    ], done.stdout


async def test_every_kind_of_parameter_travels_and_lanes_see_the_defaults() -> None:
    app = App()

    @app.task(lane=lambda first, second, *rest, key="k", **extra: f"{first}-{key}")
    async def mixed(first: int, /, second: str, *rest: int, key: str = "k", **extra: int) -> str:
        return f"{first} {second} {rest} {key} {sorted(extra.items())}"

    call = mixed.call(1, "two", 3, 4, z=5)
    assert (call.lane, call.args) == ("1-k", {"first": 1, "second": "two", "rest": [3, 4],
                                              "extra": {"z": 5}})  # fmt: skip
    with app.eager_mode():
        handle = await mixed.enqueue(1, "two", 3, 4, key="v", z=5)
        assert await handle.result() == "1 two (3, 4) v [('z', 5)]"
        with pytest.raises(InvalidArgument, match="positional only, but was passed as a keyword"):
            await mixed.enqueue(second="two", first=1)  # type: ignore[call-arg]


async def test_a_failing_job_hook_fails_the_attempt() -> None:
    app = App()

    @app.before_job
    async def refuse(ctx: object) -> None:
        raise PermissionError("not today")

    @app.task
    async def never() -> None:
        raise AssertionError("the hook runs first")

    with app.eager_mode():
        handle = await never.enqueue()
    with pytest.raises(TaskFailed, match="PermissionError: not today"):
        await handle.result()


class Point(msgspec.Struct):
    x: int
    y: int


async def test_msgspec_structs_travel_as_json_and_are_rebuilt() -> None:
    app = App()

    @app.task
    async def flip(point: Point, others: list[Point] | None = None) -> Point:
        assert all(isinstance(p, Point) for p in others or [])
        return Point(point.y, point.x)

    call = flip.call(Point(1, 2), [Point(3, 4)])
    assert call.args == {"point": {"x": 1, "y": 2}, "others": [{"x": 3, "y": 4}]}
    with app.eager_mode():
        handle = await flip.enqueue(Point(1, 2), [Point(3, 4)])
    assert await handle.result() == Point(2, 1)


def test_a_call_by_place_is_checked_like_any_other() -> None:
    """The by-place shortcut (every positional parameter given, nothing else) still checks
    the values, and a required keyword-only parameter still has to be given."""
    app = App(queue="t")

    @app.task
    async def pair(a: int, b: str) -> None: ...

    @app.task
    async def keyed(a: int, *, b: int) -> None: ...

    assert pair.call(1, "x").args == {"a": 1, "b": "x"}
    with pytest.raises(InvalidArgument, match="'b' expects str, got int"):
        pair.call(1, 2)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="missing a required argument: 'b'"):
        keyed.call(1)  # type: ignore[call-arg]
    assert keyed.call(1, b=2).args == {"a": 1, "b": 2}

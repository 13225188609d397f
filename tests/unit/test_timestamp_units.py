"""Epoch timestamps are Unix seconds: one that looks like milliseconds (> 10**11, the year 5138
in seconds) is refused with an InvalidArgument that names the argument and says so."""

from __future__ import annotations

import time

import pytest

from echomq import App, InvalidArgument
from echomq.engine.options import when_run_at


def test_a_millisecond_timestamp_is_refused_naming_the_argument() -> None:
    with pytest.raises(InvalidArgument, match="looks like milliseconds") as refused:
        when_run_at(time.time() * 1000)
    assert refused.value.argument == "when"
    with pytest.raises(InvalidArgument, match="looks like milliseconds") as refused:
        when_run_at(1_700_000_000_000, "at")
    assert refused.value.argument == "at"


def test_seconds_are_taken_as_engine_ms() -> None:
    assert when_run_at(1_700_000_000) == 1_700_000_000_000
    assert when_run_at(1_700_000_000.25) == 1_700_000_000_250
    with pytest.raises(InvalidArgument, match="at most") as refused:
        when_run_at(10**11)  # seconds (the year 5138): not ms, but past the 10-year horizon
    assert "milliseconds" not in str(refused.value)


async def test_task_using_at_in_milliseconds_is_refused_in_eager_mode_too() -> None:
    app = App("valkey://127.0.0.1:1")  # eager mode never connects
    ran: list[int] = []

    @app.task()
    async def tick(n: int) -> None:
        ran.append(n)

    with app.eager_mode(), pytest.raises(InvalidArgument, match="milliseconds") as refused:
        await tick.using(at=time.time() * 1000).enqueue(1)
    assert refused.value.argument == "at"
    assert ran == []

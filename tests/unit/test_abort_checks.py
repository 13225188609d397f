"""Abort's pure pieces: the reason's bound, what each state before a cancel answers, and a
shield outside a running job."""

from __future__ import annotations

import asyncio

import pytest

from echomq import InvalidArgument, shielded
from echomq.engine import Cancellation
from echomq.engine.cancels import MAX_REASON, cancel_reason, cancellation


def test_a_reason_is_a_str_of_at_most_256_utf8_bytes() -> None:
    assert cancel_reason("") == ""
    assert cancel_reason("ü" * (MAX_REASON // 2)) == "ü" * 128
    with pytest.raises(InvalidArgument, match="at most 256 bytes"):
        cancel_reason("ü" * 129)  # 258 bytes, 129 characters
    with pytest.raises(InvalidArgument, match="must be a str"):
        cancel_reason(None)


@pytest.mark.parametrize(
    ("was", "outcome"),
    [
        ("pending", "cancelled"),
        ("scheduled", "cancelled"),
        ("active", "requested"),
        ("completed", "finished"),
        ("dead", "finished"),
        ("cancelled", "finished"),
        ("", "absent"),
    ],
)
def test_the_state_before_a_cancel_says_what_it_did(was: str, outcome: str) -> None:
    answer = cancellation("JOB0000000000a", was)
    assert answer.outcome == outcome
    assert answer == Cancellation("JOB0000000000a", was or "absent")  # type: ignore[arg-type]


def test_a_shield_outside_a_running_job_does_nothing() -> None:
    async def body() -> str:
        async with shielded(), shielded():
            await asyncio.sleep(0)
        return "ran"

    assert asyncio.run(body()) == "ran"

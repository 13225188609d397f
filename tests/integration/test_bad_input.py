"""Every public call validates before any wire traffic: a clear message, and nothing written."""

from __future__ import annotations

from typing import Any

import pytest

from echomq.engine.queue import Item, Queue
from echomq.engine.results import Job
from echomq.errors import InvalidArgument, LockedError, StateError
from echomq.wire.url import ConnectionOptions


async def keys_of(queue: Queue) -> list[bytes]:
    cursor, found = b"0", []
    while True:
        cursor, batch = await queue.wire.call("SCAN", cursor, "MATCH", queue.keys.root + "*")
        found += batch
        if cursor == b"0":
            return sorted(found)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "invalid queue name '': must be 1 to 128 characters"),
        ("a{b}", "character '{' at position 1 is not allowed"),
        ("emq", "'emq' is reserved"),
        ("x" * 129, "must be 1 to 128 characters, got 129"),
    ],
)
async def test_bad_queue_name_is_refused_before_connecting(name: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        await Queue.connect(ConnectionOptions(port=1), name)  # port 1: nothing is dialled


CASES: list[tuple[str, dict[str, Any], str]] = [
    ("lone surrogate lane", {"lane": "a\udc80"}, "holds a lone surrogate '\\\\udc80'"),
    ("empty lane", {"lane": ""}, "invalid lane '': must be 1 to 1024 bytes of UTF-8"),
    ("non-JOB id", {"id": "PLR0KHTOWnGLuC"}, "namespace 'PLR' is not the required 'JOB'"),
    ("short id", {"id": "JOB123"}, "must be exactly 14 characters, got 6"),
    ("long dedup key", {"dedup_key": "é" * 513}, "invalid dedup key .* got 1026"),
    ("unencodable payload", {"payload": {1, 2}}, "not JSON-encodable"),
    ("nan payload", {"payload": float("nan")}, "not JSON-encodable"),
]


@pytest.mark.parametrize(("label", "options", "message"), CASES, ids=[c[0] for c in CASES])
async def test_bad_enqueue_argument_says_what_and_writes_nothing(
    queue: Queue, label: str, options: dict[str, Any], message: str
) -> None:
    payload = options.pop("payload", "ok")
    with pytest.raises(InvalidArgument, match=message):
        await queue.enqueue(payload, **options)
    assert await keys_of(queue) == []


async def test_negative_delay_and_nonpositive_lease_are_refused(queue: Queue) -> None:
    with pytest.raises(InvalidArgument, match="invalid delay -1: must be >= 0"):
        await queue.enqueue_in(-1, "x")
    with pytest.raises(InvalidArgument, match="invalid lease 0: must be > 0"):
        await queue.claim(lease=0)
    with pytest.raises(InvalidArgument, match="invalid lease -5: must be > 0"):
        await queue.claim_batch(10, lease=-5)
    with pytest.raises(InvalidArgument, match=r"invalid n 0: must be an integer in \[1, 1000\]"):
        await queue.claim_batch(0)
    assert await keys_of(queue) == []


async def test_settle_by_id_needs_a_valid_token(queue: Queue) -> None:
    await queue.enqueue("x")
    job = await queue.claim()
    assert isinstance(job, Job)
    with pytest.raises(InvalidArgument, match="settling by id needs the token"):
        await queue.complete(job.id)
    with pytest.raises(InvalidArgument, match="invalid token 0"):
        await queue.complete(job.id, 0)
    with pytest.raises(InvalidArgument, match="invalid max_attempts 0"):
        await queue.retry(job, max_attempts=0)
    assert await queue.state(job.id) == "active"  # nothing was settled


async def test_lane_settings_are_validated(queue: Queue) -> None:
    with pytest.raises(InvalidArgument, match="invalid ceiling 0"):
        await queue.lane("a").limit(0)
    with pytest.raises(InvalidArgument, match="invalid weight -1"):
        await queue.lane("a").weight(-1)
    with pytest.raises(InvalidArgument, match="a rate needs a window"):
        await queue.lane("a").rate(5)
    with pytest.raises(InvalidArgument, match="invalid window 0"):
        await queue.lane("a").rate(5, 0)
    with pytest.raises(InvalidArgument, match="invalid max 0"):
        await queue.rate_limit(0, 1.0)
    with pytest.raises(InvalidArgument, match="invalid lane '': must be 1 to 1024 bytes"):
        queue.lane("")
    assert await keys_of(queue) == []


async def test_enqueue_many_gives_a_bad_item_its_own_error_verdict(queue: Queue) -> None:
    verdicts = await queue.enqueue_many(
        [Item("a"), Item("b", id="ORD0KHTOWnGLuC"), Item("c", lane=""), Item("d")]
    )
    assert [v.kind for v in verdicts] == ["enqueued", "error", "error", "enqueued"]
    assert "namespace 'ORD'" in str(verdicts[1].error)
    assert "invalid lane ''" in str(verdicts[2].error)
    assert (await queue.counts()).pending == 2


async def test_remove_refuses_a_leased_job_and_reprocess_a_live_one(queue: Queue) -> None:
    verdict = await queue.enqueue("x")
    job = await queue.claim()
    assert isinstance(job, Job)
    with pytest.raises(LockedError, match=r"EMQLOCK job \w+ is leased"):
        await queue.remove(verdict.id)
    with pytest.raises(StateError, match=r"EMQSTATE reprocess refused: job \w+ is active"):
        await queue.reprocess(verdict.id)
    assert await queue.state(verdict.id) == "active"
    with pytest.raises(StateError, match="EMQSTATE obliterate refused: queue is not paused"):
        await queue.obliterate()
    assert (await queue.counts()).active == 1

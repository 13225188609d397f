"""Every number, name, id and payload a user can pass, fuzzed (Hypothesis) against a real queue.

Each call either succeeds, leaving a queue that still claims, or is refused with an
``InvalidArgument`` that names the argument; a refused call leaves every key of the queue
byte-identical (DUMP before and after). The scripts hold the same bounds on their own: a raw
call with an argument out of bounds is an ``EMQARG`` refusal that wrote nothing.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq import (
    ArgumentRefused,
    InvalidArgument,
    Job,
    LockedError,
    Queue,
    StaleTokenError,
    StateError,
)
from echomq.errors import server_error

Call = Callable[[Queue, Job, Any], Coroutine[Any, Any, object]]

#: Each public call with one argument left to the fuzzer, and the name its refusal must give.
CALLS: dict[str, tuple[str, Call]] = {
    "enqueue payload": ("payload", lambda q, j, v: q.enqueue(v)),
    "enqueue group": ("group", lambda q, j, v: q.enqueue(1, group=v)),
    "enqueue id": ("job id", lambda q, j, v: q.enqueue(1, id=v)),
    "enqueue dedup_key": ("dedup key", lambda q, j, v: q.enqueue(1, dedup_key=v)),
    "enqueue dedup_ttl": ("dedup_ttl", lambda q, j, v: q.enqueue(1, dedup_key="k", dedup_ttl=v)),
    "enqueue_in delay": ("delay", lambda q, j, v: q.enqueue_in(v, 1)),
    "enqueue_at when": ("when", lambda q, j, v: q.enqueue_at(v, 1)),
    "claim lease": ("lease", lambda q, j, v: q.claim(lease=v)),
    "claim_batch n": ("n", lambda q, j, v: q.claim_batch(v)),
    "retry delay": ("delay", lambda q, j, v: q.retry(j, delay=v)),
    "retry max_attempts": ("max_attempts", lambda q, j, v: q.retry(j, max_attempts=v)),
    "delay delay": ("delay", lambda q, j, v: q.delay(j, delay=v)),
    "extend lease": ("lease", lambda q, j, v: q.extend(j, lease=v)),
    "complete token": ("token", lambda q, j, v: q.complete(j.id, v)),
    "retry traceback": ("traceback", lambda q, j, v: q.retry(j, traceback=v)),
    "promote limit": ("limit", lambda q, j, v: q.promote(v)),
    "reap limit": ("limit", lambda q, j, v: q.reap(limit=v)),
    "reap max_stalled": ("max_stalled", lambda q, j, v: q.reap(max_stalled=v)),
    "upkeep limit": ("limit", lambda q, j, v: q.upkeep(limit=v)),
    "rate_limit max": ("max", lambda q, j, v: q.rate_limit(v, 1.0)),
    "rate_limit window": ("window", lambda q, j, v: q.rate_limit(5, v)),
    "concurrency": ("ceiling", lambda q, j, v: q.concurrency(v)),
    "lane rate max": ("max", lambda q, j, v: q.lane("g").rate(v, 1.0)),
    "lane rate window": ("window", lambda q, j, v: q.lane("g").rate(5, v)),
    "lane limit": ("ceiling", lambda q, j, v: q.lane("g").limit(v)),
    "lane weight": ("weight", lambda q, j, v: q.lane("g").weight(v)),
    "lane name": ("group", lambda q, j, v: q.lane(v).pause()),
    "dead limit": ("limit", lambda q, j, v: q.dead(v)),
    "job id": ("job id", lambda q, j, v: q.job(v)),
    "reassign group": ("group", lambda q, j, v: q.reassign(j.id, v)),
}


class Deep(list[Any]):
    """A 5000-deep list (a RecursionError in JSON before the bound), printed briefly."""

    def __repr__(self) -> str:
        return "<a 5000-deep list>"


_deep = Deep()
for _ in range(5000):
    _deep = Deep([_deep])

values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 2, 3, 1000, 10**4, 2**53 + 1, 1e11, 1.7e12, 1e17, 1e300, -1e-9]),
    st.sampled_from([None, True, False, "3", "", "a b", "é", b"x", [], {}, math.nan, _deep]),
    st.text(max_size=12),
)


async def _dump(queue: Queue) -> dict[bytes, tuple[bytes, bool]]:
    """Every key of the queue: its DUMP and whether it has a TTL (it may expire meanwhile)."""
    keys: list[bytes] = []
    cursor: Any = b"0"
    while True:
        cursor, batch = await queue.wire.call("SCAN", cursor, "MATCH", queue.keys.root + "*")
        keys += batch
        if cursor in (b"0", 0, "0"):
            break
    keys.sort()
    replies = await queue.wire.call_many(
        [c for key in keys for c in (("DUMP", key), ("PTTL", key))]
    )
    # PTTL -1: no TTL; -2 or a None DUMP: it expired while being read.
    dumped = {key: (replies[2 * i], replies[2 * i + 1] != -1) for i, key in enumerate(keys)}
    return {key: value for key, value in dumped.items() if value[0] is not None}


def _unchanged(before: dict[bytes, tuple[bytes, bool]], after: dict[bytes, Any]) -> bool:
    """No write: the same keys, byte-identical, but for keys with a TTL that expired between."""
    gone = {key for key in before if key not in after}
    same = all(before.get(key, (None,))[0] == value[0] for key, value in after.items())
    return same and all(before[key][1] for key in gone)


async def _held(queue: Queue) -> Job:
    """A job leased for the settle calls (a fresh one once a fuzzed settle succeeded)."""
    await queue.resume()
    await queue.rate_limit(None)
    await queue.concurrency(None)
    await queue.enqueue("held", group="held")
    while not isinstance(job := await queue.claim(lease=600), Job):
        await queue.lane("g").rate(None)
    return job


@pytest.mark.timeout(300)
def test_every_fuzzed_call_succeeds_or_names_its_argument_and_writes_nothing(
    valkey_url: str, queue_name: str
) -> None:
    loop = asyncio.new_event_loop()
    queue = loop.run_until_complete(Queue.connect(valkey_url, queue_name, events=False))
    state: dict[str, Job] = {"job": loop.run_until_complete(_held(queue))}
    outcomes = {"ok": 0, "refused": 0}

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(call=st.sampled_from(sorted(CALLS)), value=values)
    def fuzz(call: str, value: Any) -> None:
        argument, run = CALLS[call]
        before = loop.run_until_complete(_dump(queue))
        try:
            loop.run_until_complete(run(queue, state["job"], value))
        except InvalidArgument as exc:
            blamed = exc.argument
            assert blamed == argument, f"{call}({value!r}) blamed {blamed!r}: {exc}"  # noqa: PT017
            assert _unchanged(before, loop.run_until_complete(_dump(queue))), f"{call} wrote"
            outcomes["refused"] += 1
            return
        except (StaleTokenError, StateError, LockedError):
            # A well-formed value the engine refuses on the job's state (a token that is not
            # the holder's): a typed refusal too, and one that wrote nothing.
            assert _unchanged(before, loop.run_until_complete(_dump(queue))), f"{call} wrote"
            outcomes["refused"] += 1
            return
        outcomes["ok"] += 1
        # An accepted value must leave a queue that works: the next claim answers a value.
        loop.run_until_complete(queue.claim(lease=1))
        if loop.run_until_complete(queue.state(state["job"].id)) != "active":
            state["job"] = loop.run_until_complete(_held(queue))

    try:
        fuzz()
    finally:
        loop.run_until_complete(queue.pause())
        loop.run_until_complete(queue.obliterate(force=True))
        loop.run_until_complete(queue.close())
        loop.close()
    assert outcomes["ok"] > 0, outcomes
    assert outcomes["refused"] > 0, outcomes


#: Raw script calls with one argument out of the bounds the host checks first.
RAW: list[tuple[str, list[Any], str]] = [
    ("claim", [1e300, 1], "lease"),
    ("claim", [1000, 2**53 + 1], "n"),
    ("claim", [86_400_001, 1], "lease"),
    ("configure", ["window", 10**17], "window"),
    ("configure", ["concurrency", -1], "concurrency"),
    ("configure", ["max", 5, "window", "x"], "window"),
    ("configure", ["bogus", 1], "field"),
    ("lane_limit", ["g", "grate", "5:100000000000000000"], "window"),
    ("lane_limit", ["g", "gweight", 0], "weight"),
    ("lane_limit", ["g", "grate", "20000:1000:smooth"], "max"),
    ("lane_limit", ["g", "grate", "5:1000:sliding"], "rate"),
    ("configure", ["mode", "sliding"], "mode"),
    ("configure", ["max", 20000, "window", 1000, "mode", "smooth"], "max"),
    ("configure", ["dlimit", 0], "ceiling"),
    # policy.lua: a bad value of the last named lane refuses the whole call before any write.
    ("policy", ["", "", "5:1000", "a", "1", "", "", "{}", "b", "", "0", "", "{}"], "weight"),
    ("policy", ["", "", "5:0", "a", "1", "", "", "{}"], "window"),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", -(10**17), "", 0], "run_at"),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", 0, "k", 10**17], "dedup_ttl"),
    ("retry", ["JOB0KHTOWnGLuC", 1, 0, 2**60, "e", ""], "max_attempts"),
    ("retry", ["JOB0KHTOWnGLuC", 1, 0, 3, "e", "t" * 8193], "traceback"),
    ("complete", [-1, "JOB0KHTOWnGLuC", 1, ""], "ttl"),
    ("complete", [30 * 86_400_000 + 1, "JOB0KHTOWnGLuC", 1, "1"], "ttl"),
    ("complete", [0, "JOB0KHTOWnGLuC", 0, ""], "token"),
    ("delay", ["JOB0KHTOWnGLuC", 1, 10**17], "delay"),
    ("extend", [0, "JOB0KHTOWnGLuC", 1], "lease"),
    ("reap", [2**60, 3], "limit"),
    ("tick", [100, 100, 0], "max_stalled"),
    ("promote", ["many"], "limit"),
]


async def _raw(queue: Queue, script: str, args: list[Any]) -> None:
    root = (queue.keys.root, queue.keys.gate)
    reply = await queue.scripts.run(queue.wire, queue.scripts[script], root, args)
    if script == "enqueue":  # a batch script: it refuses the item alone, in its reply
        assert reply[0] == -1, reply
        raise server_error(reply[1].decode())


@pytest.mark.parametrize(("script", "args", "argument"), RAW)
async def test_scripts_refuse_out_of_bounds_arguments_before_any_write(
    queue: Queue, script: str, args: list[Any], argument: str
) -> None:
    await queue.enqueue("x")
    job = await queue.claim(lease=600)
    assert isinstance(job, Job)
    before = await _dump(queue)
    with pytest.raises(ArgumentRefused) as refused:
        await _raw(queue, script, args)
    assert refused.value.argument == argument
    assert _unchanged(before, await _dump(queue))

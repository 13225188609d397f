"""Every number, name, id and payload a user can pass, fuzzed (Hypothesis) against a real queue.

Each call either succeeds, leaving a queue that still claims, or is refused with an
``InvalidArgument`` that names the argument; a refused call leaves every key of the queue
byte-identical (DUMP before and after). The scripts hold the same bounds on their own: a raw
call with an argument out of bounds is an ``EMQARG`` refusal that wrote nothing. The task layer
is fuzzed the same way: each ``app.task``/``app.periodic`` option, ``using``, task arguments,
the canvas (``chain``, ``group``, ``flow``) and handles; a refused declaration leaves the app's
tasks and schedules as they were.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echomq import (
    App,
    Batching,
    Fixed,
    Handle,
    InvalidArgument,
    Job,
    Queue,
    Task,
    chain,
    flow,
    group,
)
from echomq.errors import ArgumentRefused, LockedError, StaleTokenError, StateError, server_error
from echomq.tasks import TaskFlow

Call = Callable[[Queue, Job, Any], Coroutine[Any, Any, object]]

#: Each public call with one argument left to the fuzzer, and the name its refusal must give
#: (names separated by "|": either; ``cool(until=None)`` is ``cool()``, which names seconds).
CALLS: dict[str, tuple[str, Call]] = {
    "enqueue payload": ("payload", lambda q, j, v: q.enqueue(v)),
    "enqueue lane": ("lane", lambda q, j, v: q.enqueue(1, lane=v)),
    "enqueue id": ("job id", lambda q, j, v: q.enqueue(1, id=v)),
    "enqueue dedup_key": ("dedup key", lambda q, j, v: q.enqueue(1, dedup_key=v)),
    "enqueue dedup_ttl": ("dedup_ttl", lambda q, j, v: q.enqueue(1, dedup_key="k", dedup_ttl=v)),
    "enqueue dedup_from": (
        "dedup_from",
        lambda q, j, v: q.enqueue(1, dedup_key="k", dedup_ttl=5, dedup_from=v),
    ),
    "enqueue result_ttl": ("result_ttl", lambda q, j, v: q.enqueue(1, result_ttl=v)),
    "enqueue priority": ("priority", lambda q, j, v: q.enqueue(1, priority=v)),
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
    "lane name": ("lane", lambda q, j, v: q.lane(v).pause()),
    "lane cool seconds": ("seconds", lambda q, j, v: q.lane("g").cool(v)),
    "lane cool until": ("until|seconds", lambda q, j, v: q.lane("g").cool(until=v)),
    "cool after": ("after", lambda q, j, v: q.cool(j, after=v)),
    "cool until": ("until|after", lambda q, j, v: q.cool(j, until=v)),
    "dead limit": ("limit", lambda q, j, v: q.dead(v)),
    "job id": ("job id", lambda q, j, v: q.job(v)),
    "state id": ("job id", lambda q, j, v: q.state(v)),
    "wait id": ("job id", lambda q, j, v: q.wait(v, 0.01)),
    "children id": ("job id", lambda q, j, v: q.children(v)),
    "progress value": ("value", lambda q, j, v: q.progress(j, value=v, log="x")),
    "progress log": ("log", lambda q, j, v: q.progress(j, value=1, log=v)),
    "reassign lane": ("lane", lambda q, j, v: q.reassign(j.id, v)),
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
    st.sampled_from(["PLR0KHTOWnGLuC", "JOB0KHTOWnGLuC", {1: 2}, (5, 1.0), (1, 2, 3), [1.5]]),
    st.sampled_from(["\ud800", ["\udfff"], {"k": "\ud800"}]),  # lone surrogates: no UTF-8
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
    if not keys:
        return {}
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
    await queue.lane("held").uncool()  # a fuzzed cool of the held job cooled its lane
    await queue.enqueue("held", lane="held")
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
            assert blamed in argument.split("|"), f"{call}({value!r}) blamed {blamed!r}: {exc}"  # noqa: PT017
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
    (
        "policy",
        ["", "", "5:1000", "", "a", "1", "", "", "", "{}", "b", "", "0", "", "", "{}"],
        "weight",
    ),
    ("policy", ["", "", "5:0", "", "a", "1", "", "", "", "{}"], "window"),
    ("policy", ["", "", "", "", "a", "", "", "", "0", "{}"], "cap"),
    ("policy", ["", "", "", "1000000001"], "cap"),
    ("lane_limit", ["a", "gcap", "0"], "cap"),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", -(10**17), "", 0, "enqueue", -1, "", 5, 1], "run_at"),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", 0, "k", 10**17, "enqueue", -1, "", 5, 1], "dedup_ttl"),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", 0, "k", 1000, "later", -1, "", 5, 1], "dedup_from"),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", 0, "k", 0, "finish", -1, "", 5, 1], "dedup_ttl"),
    (
        "enqueue",
        ["JOB0KHTOWnGLuC", "1", "_", 0, "", 0, "enqueue", 30 * 86_400_001, "", 5],
        "result_ttl",
    ),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", 0, "", 0, "enqueue", -2, "", 5, 1], "result_ttl"),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", 0, "", 0, "enqueue", -1, "", 10, 1], "priority"),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", 0, "", 0, "enqueue", -1, "", -1, 1], "priority"),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", 0, "", 0, "enqueue", -1, "", 5, 0], "cost"),
    ("enqueue", ["JOB0KHTOWnGLuC", "1", "_", 0, "", 0, "enqueue", -1, "", 5, 10**6], "cost"),
    ("retry", ["JOB0KHTOWnGLuC", 1, 0, 2**60, "e", ""], "max_attempts"),
    ("retry", ["JOB0KHTOWnGLuC", 1, 0, 3, "e", "t" * 8193], "traceback"),
    ("complete", [-1, "JOB0KHTOWnGLuC", 1, "", 0], "ttl"),
    ("complete", [30 * 86_400_000 + 1, "JOB0KHTOWnGLuC", 1, "1", 0], "ttl"),
    ("complete", [0, "JOB0KHTOWnGLuC", 0, "", 0], "token"),
    ("complete", [0, "JOB0KHTOWnGLuC", 1, "", -1], "ran"),
    ("complete", [0, "JOB0KHTOWnGLuC", 1, "", 30 * 86_400_000 + 1], "ran"),
    ("delay", ["JOB0KHTOWnGLuC", 1, 10**17], "delay"),
    ("cool", ["g", 10**17, "in"], "seconds"),
    ("cool", ["g", 0, "in"], "seconds"),
    ("cool", ["g", 2**60, "at"], "until"),
    ("cool", ["g", 1000, "soon"], "mode"),
    ("cool", ["g", 1000, "in", "JOB0KHTOWnGLuC", 0], "token"),
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


# -- the task layer: declarations, the canvas, calls and handles --------------------------------

#: Each declaration with one option left to the fuzzer, and the names its refusal may give. A
#: declaration touches no server: a refused one must leave the app's tasks and schedules as they
#: were.
Declare = Callable[[App, Any, str], object]
DECLARATIONS: dict[str, tuple[frozenset[str], Declare]] = {
    "task name": (frozenset({"name"}), lambda a, v, n: a.task(v)(_fresh())),
    "task queue": (frozenset({"queue name"}), lambda a, v, n: a.task(n, queue=v)(_fresh())),
    "task lane": (frozenset({"lane"}), lambda a, v, n: a.task(n, lane=v)(_fresh())),
    "task retries": (frozenset({"retries"}), lambda a, v, n: a.task(n, retries=v)(_fresh())),
    "task backoff": (frozenset({"backoff"}), lambda a, v, n: a.task(n, backoff=v)(_fresh())),
    "task timeout": (frozenset({"timeout"}), lambda a, v, n: a.task(n, timeout=v)(_fresh())),
    "task dedup": (frozenset({"dedup"}), lambda a, v, n: a.task(n, dedup=v)(_fresh())),
    "task dedup_ttl": (frozenset({"dedup_ttl"}), lambda a, v, n: a.task(n, dedup_ttl=v)(_fresh())),
    "task lane_limit": (
        frozenset({"lane_limit"}),
        lambda a, v, n: a.task(n, lane_limit=v)(_fresh()),
    ),
    "task lane_rate": (frozenset({"lane_rate"}), lambda a, v, n: a.task(n, lane_rate=v)(_fresh())),
    "task batch": (frozenset({"batch", "queue"}), lambda a, v, n: a.task(n, batch=v)(_fresh())),
    "periodic every": (
        frozenset({"every", "cron"}),
        lambda a, v, n: a.periodic(every=v, name=n)(_fresh()),
    ),
    "periodic cron": (frozenset({"cron"}), lambda a, v, n: a.periodic(cron=v, name=n)(_fresh())),
    "periodic tz": (
        frozenset({"tz"}),
        lambda a, v, n: a.periodic(cron="0 * * * *", tz=v, name=n)(_fresh()),
    ),
    "periodic name": (frozenset({"name"}), lambda a, v, n: a.periodic(every=60, name=v)(_fresh())),
    "periodic missed": (
        frozenset({"missed"}),
        lambda a, v, n: a.periodic(every=60, name=n, missed=v)(_fresh()),
    ),
    "periodic lane": (
        frozenset({"lane"}),
        lambda a, v, n: a.periodic(every=60, name=n, lane=v)(_fresh()),
    ),
    "periodic args": (
        frozenset({"args"}),
        lambda a, v, n: a.periodic(every=60, name=n, args=v)(_fresh()),
    ),
    "periodic kwargs": (
        frozenset({"kwargs", "args"}),
        lambda a, v, n: a.periodic(every=60, name=n, kwargs=v)(_fresh()),
    ),
}


def _fresh() -> Callable[..., Coroutine[Any, Any, Any]]:
    async def beat(n: Any = 0) -> Any:
        return n

    return beat


@dataclass(frozen=True)
class Tasks:
    """The tasks a canvas fuzz builds with: ``first`` takes a value, ``link`` receives one."""

    app: App
    first: Task[Any, Any]
    link: Task[Any, Any]
    typed: Task[Any, Any]
    eager: Handle[Any]


def _links(t: Tasks, v: Any) -> list[Any]:
    """A fuzzed value as a chain's links: a count of links, a list of anything, or one value."""
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 5_000:
        return [t.link] * v
    return list(v) if isinstance(v, list) else [v]


async def _admit(built: Any) -> object:
    """Admit what a canvas call built (its refusals come from building or from admitting)."""
    return await built.enqueue()


#: Each call of the task layer that may write, with one argument left to the fuzzer, and the
#: names its refusal may give: a refused call leaves every key of the app's queue as it was.
Act = Callable[[Tasks, Any], Coroutine[Any, Any, object]]
ACTS: dict[str, tuple[frozenset[str], Act]] = {
    "chain links": (
        frozenset({"links"}),
        lambda t, v: _admit(chain(t.first.call(1), *_links(t, v))),
    ),
    "chain first": (frozenset({"first"}), lambda t, v: _admit(chain(v, t.link))),
    "group calls": (
        frozenset({"calls"}),
        lambda t, v: _admit(group(_links(t, v) if isinstance(v, list) else v, then=t.link)),
    ),
    "group then": (frozenset({"then"}), lambda t, v: _admit(group([t.first.call(1)], then=v))),
    "group on_failure": (
        frozenset({"on_failure"}),
        lambda t, v: _admit(group([t.first.call(1)], then=t.link, on_failure=v)),
    ),
    "flow parent": (frozenset({"parent"}), lambda t, v: _admit(flow(v, [t.first.call(1)]))),
    "flow children": (frozenset({"children"}), lambda t, v: _admit(flow(t.first.call(1), v))),
    "flow on_failure": (
        frozenset({"on_failure"}),
        lambda t, v: _admit(flow(t.first.call(1), [t.first.call(2)], on_failure=v)),
    ),
    "TaskFlow parent": (
        frozenset({"parent"}),
        lambda t, v: _admit(TaskFlow(v, (t.first.call(1),))),
    ),
    "TaskFlow children": (
        frozenset({"children"}),
        lambda t, v: _admit(TaskFlow(t.link.receiving(), v, gather="one")),
    ),
    "TaskFlow on_failure": (
        frozenset({"on_failure"}),
        lambda t, v: _admit(TaskFlow(t.first.call(1), (t.first.call(2),), v)),
    ),
    "TaskFlow gather": (
        frozenset({"gather"}),
        lambda t, v: _admit(TaskFlow(t.link.receiving(), (t.first.call(2),), gather=v)),
    ),
    "enqueue_flow": (frozenset({"flow"}), lambda t, v: t.app.enqueue_flow(v)),
    "enqueue_many": (frozenset({"calls"}), lambda t, v: t.app.enqueue_many(v)),
    "task args": (frozenset({"args"}), lambda t, v: t.first.enqueue(v)),
    "typed args": (frozenset({"args"}), lambda t, v: t.typed.enqueue(v)),
    "using lane": (frozenset({"lane"}), lambda t, v: t.first.using(lane=v).enqueue(1)),
    "using id": (frozenset({"job id"}), lambda t, v: t.first.using(id=v).enqueue(1)),
    "using dedup_key": (
        frozenset({"dedup key"}),
        lambda t, v: t.first.using(dedup_key=v).enqueue(1),
    ),
    "using delay": (frozenset({"delay"}), lambda t, v: t.first.using(delay=v).enqueue(1)),
    "using at": (frozenset({"at"}), lambda t, v: t.first.using(at=v).enqueue(1)),
    "using priority": (
        frozenset({"priority"}),
        lambda t, v: t.first.using(priority=v).enqueue(1),
    ),
    "task handle": (frozenset({"job id"}), lambda t, v: t.first.handle(v).status()),
    "eager logs": (frozenset({"limit"}), lambda t, v: t.eager.logs(v)),
    "eager result": (frozenset({"timeout"}), lambda t, v: t.eager.result(timeout=v)),
    "eager cancel": (frozenset({"reason"}), lambda t, v: t.eager.cancel(reason=v)),
}

task_values = st.one_of(
    values,
    st.sampled_from([0, 1, 31, 32, 33, 999, 1000, 5000, "0 * * * *", "61 * * * *", "UTC"]),
    st.sampled_from([Fixed(1.0), Batching(max_size=2, max_wait=1.0), "Nowhere/City", "skip"]),
    st.tuples(values, values),
    st.lists(st.sampled_from([1, "x", None, "links", "calls", "flow"]), max_size=4),
)


def _tasks(app: App) -> Tasks:
    @app.task(name="first")
    async def first(n: object) -> object:
        return n

    @app.task(name="link")
    async def link(previous: object) -> object:
        return previous

    @app.task(name="typed")
    async def typed(n: int) -> int:
        return n

    with app.eager_mode():
        eager = asyncio.new_event_loop()
        try:
            handle = eager.run_until_complete(first.enqueue(1))
        finally:
            eager.close()
    return Tasks(app, first, link, typed, handle)


def _as_canvas(t: Tasks, v: Any) -> Any:
    """Fuzzed list items as calls, links or flows where they name one (else as they are)."""
    named = {"links": t.link, "calls": t.first.call(2), "flow": chain(t.first.call(3), t.link)}
    return named.get(v, v) if isinstance(v, str) else v


@pytest.mark.timeout(300)
def test_every_fuzzed_declaration_and_canvas_names_its_argument_and_registers_nothing(
    valkey_url: str, queue_name: str
) -> None:
    loop = asyncio.new_event_loop()
    app = App(valkey_url, queue=queue_name)
    loop.run_until_complete(app.connect())
    tasks = _tasks(app)
    queue = app.queue()
    outcomes = {"ok": 0, "refused": 0}
    names = iter(range(10**9))

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(call=st.sampled_from(sorted(DECLARATIONS) + sorted(ACTS)), value=task_values)
    def fuzz(call: str, value: Any) -> None:
        if isinstance(value, list):
            value = [_as_canvas(tasks, item) for item in value]
        registry = (dict(app.tasks), dict(app.schedules))
        if call in DECLARATIONS:
            argument, run = DECLARATIONS[call][0], DECLARATIONS[call][1]
            before: dict[bytes, tuple[bytes, bool]] = {}
            attempt: Callable[[], object] = lambda: run(app, value, f"n{next(names)}")  # noqa: E731
        else:
            argument, act = ACTS[call]
            before = loop.run_until_complete(_dump(queue))
            attempt = lambda: loop.run_until_complete(act(tasks, value))  # noqa: E731
        try:
            attempt()
        except InvalidArgument as exc:
            blamed = exc.argument
            assert blamed in argument, f"{call}({value!r}) blamed {blamed!r}: {exc}"  # noqa: PT017
            assert str(exc)  # noqa: PT017 - the message builds, whatever the value
            assert (dict(app.tasks), dict(app.schedules)) == registry, f"{call} registered"
            if call in ACTS:
                assert _unchanged(before, loop.run_until_complete(_dump(queue))), f"{call} wrote"
            outcomes["refused"] += 1
            return
        outcomes["ok"] += 1
        for name in app.tasks.keys() - registry[0]:  # an accepted declaration: forgotten again
            del app.tasks[name]
        for name in app.schedules.keys() - registry[1]:
            del app.schedules[name]

    try:
        fuzz()
    finally:
        for name in app.queue_names():
            loop.run_until_complete(app.queue(name).pause())
            loop.run_until_complete(app.queue(name).obliterate(force=True))
        loop.run_until_complete(app.close())
        loop.close()
    assert outcomes["ok"] > 0, outcomes
    assert outcomes["refused"] > 0, outcomes

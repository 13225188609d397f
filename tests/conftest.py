"""Shared fixtures: one real Valkey per test session (per xdist worker) and a queue name per test.

``ECHOMQ_TEST_URL`` points the suite at an existing server instead of starting one. Tests never
flush the server; each gets its own queue name. The modules in ``ALSO_ON_CLUSTER`` run twice:
``valkey_url`` is the single server, then the seed URL of an embedded 3-shard cluster. Tests
marked ``every_loop`` (the wire's, the FastAPI example's) run twice too: on asyncio's own event
loop, then on uvloop's (``uvicorn[standard]``'s and ``fastapi run``'s default loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import re
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

import pytest
import uvloop
from hypothesis import settings

from echomq.engine.queue import Queue
from echomq.engine.sharded import ShardedQueue
from echomq.server import EmbeddedCluster, EmbeddedValkey
from echomq.testing import discard


@dataclass(frozen=True, slots=True)
class ExternalValkey:
    """A server the suite did not start (``ECHOMQ_TEST_URL``); it is never stopped."""

    url: str = field(repr=False)


# No per-example deadline: on a shared 2-core machine one example can take 300 ms, and speed
# is for bench/, not for assertions.
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything imported so far is frozen out of the collector: the per-test collection below
    then scans only what the tests made, a few µs instead of most of a second."""
    gc.freeze()


@pytest.fixture(autouse=True)
def _collect_what_the_test_left() -> Iterator[None]:
    """Collect garbage as each test ends, so an object it leaked (an unclosed socket) warns in
    its own teardown: with warnings as errors the test that leaked fails, not whichever later
    test the collector happened to run in (a leak in one file once failed a browser test)."""
    yield
    gc.collect()


def _children() -> set[int]:
    """This process's live Python children (zombies, already ended, left out): what tests start
    (workers, producers, apps). Servers are not counted: a session fixture may start one
    lazily in the middle of a test (``getfixturevalue``), and it outlives the test by design."""
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as listing:
                found.update(int(pid) for pid in listing.read().split())
        except FileNotFoundError:  # the thread ended while listed
            continue
    return {pid for pid in found if _state(pid) not in ("Z", "") and _is_python(pid)}


def _is_python(pid: int) -> bool:
    return os.path.basename(_command(pid).split(" ", 1)[0]).startswith("python")


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return ""


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test() -> Iterator[None]:
    """A process a test started (an ``echomq worker``, a producer) is stopped when the test
    ends, even if it failed before its own ``finally``: SIGTERM (a supervisor stops its
    children), then SIGKILL after 5 s. One the test left running that way fails its teardown,
    naming its command. Processes of wider fixtures (servers) started before the test are not
    touched."""
    before = _children()
    yield
    left = _children() - before
    if not left:
        return
    commands = {pid: _command(pid) for pid in left}
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while (alive := _children() & left) and time.monotonic() < deadline:
        time.sleep(0.05)  # another process's exit: polled
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    pytest.fail(f"the test left processes running: {sorted(commands.values())}")


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return f"pid {pid}"


@pytest.fixture(scope="session")
def valkey_server() -> Iterator[EmbeddedValkey | ExternalValkey]:
    external = os.environ.get("ECHOMQ_TEST_URL")
    if external:
        yield ExternalValkey(url=external)
        return
    with EmbeddedValkey() as server:
        yield server


#: The core suite (lifecycle, lanes, limits, consumers) that must hold on a cluster too.
ALSO_ON_CLUSTER = frozenset(
    {
        "test_scenarios.py",
        "test_flow_control.py",
        "test_consumer.py",
        "test_consumer_defer.py",
        "test_admin.py",
        "test_weighted_share.py",
        "test_progress.py",
        "test_flows.py",
        "test_lane_names.py",
        "test_gates.py",
        "test_admission.py",
        "test_priorities.py",
        "test_cooling.py",
        "test_debounce.py",
        "test_costs.py",
        "test_sharded_name.py",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "every_loop: run the async test on asyncio's event loop and on uvloop's"
    )
    config.addinivalue_line(
        "markers",
        "one_slot(reason): in an ALSO_SHARDED file, a test that holds of a queue of one slot "
        "only (the reason says why: an order across lanes, a raw key, a verb not sharded yet)",
    )


#: The event loops an ``every_loop`` test runs on; every other async test runs on asyncio's.
EVERY_LOOP = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """pytest-asyncio's hook (1.4+): the loops each async test is parametrised over."""
    if item.get_closest_marker("every_loop") is not None:
        return EVERY_LOOP
    return {"asyncio": asyncio.new_event_loop}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "valkey_url" in metafunc.fixturenames and metafunc.definition.path.name in ALSO_ON_CLUSTER:
        metafunc.parametrize("valkey_url", ["single", "cluster"], indirect=True, scope="session")
    if (
        "queue" in metafunc.fixturenames
        and metafunc.definition.path.name in ALSO_SHARDED
        and metafunc.definition.get_closest_marker("one_slot") is None
    ):
        metafunc.parametrize("queue_kind", ["one-slot", "sharded"], indirect=True)


@pytest.fixture(scope="session")
def valkey_cluster() -> Iterator[EmbeddedCluster]:
    """3 primaries + 1 replica each, shared by the session (tests that break it start their own)."""
    with EmbeddedCluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def valkey_url(
    request: pytest.FixtureRequest, valkey_server: EmbeddedValkey | ExternalValkey
) -> str:
    if getattr(request, "param", "single") == "cluster":
        cluster: EmbeddedCluster = request.getfixturevalue("valkey_cluster")
        return cluster.url
    return valkey_server.url


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> str:
    test_name = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:60]
    return f"t-{test_name}-{uuid.uuid4().hex[:8]}"


#: Files whose every test must hold on a sharded queue too (three shards; the ``queue``
#: fixture is parametrised): tests that use the queue's verbs alone, not its raw keys.
ALSO_SHARDED = frozenset(
    {"test_costs.py", "test_priorities.py", "test_weighted_share.py", "test_partial_batches.py"}
)


@pytest.fixture
def queue_kind(request: pytest.FixtureRequest) -> str:
    """``one-slot`` (a ``Queue``), or ``sharded`` (a 3-shard ``ShardedQueue``: ALSO_SHARDED)."""
    return str(getattr(request, "param", "one-slot"))


@pytest.fixture
async def sharded(valkey_url: str, queue_name: str) -> AsyncIterator[ShardedQueue]:
    """A queue of three shards on the session's server, its shards' loads read again at every
    claim (``refresh=0``), paused and obliterated afterwards (every shard and the directory)."""
    q = await ShardedQueue.connect(valkey_url, queue_name, shards=3, refresh=0)
    yield q
    await discard(q)


@pytest.fixture
async def queue(valkey_url: str, queue_name: str, queue_kind: str) -> AsyncIterator[Queue]:
    """A queue of its own on the session's server, discarded (every key) afterwards."""
    sharded = {"shards": 3, "refresh": 0.0} if queue_kind == "sharded" else {}
    opener = ShardedQueue.connect if sharded else Queue.connect
    q = await opener(valkey_url, queue_name, pool_size=2, **sharded)
    yield q
    await discard(q)

"""The pytest plugin of ``echomq.testing`` (registered as the ``echomq`` plugin when echomq is
installed): a real Valkey for the test session and a fresh queue for each test.

Fixtures (all lazy: nothing starts unless a test asks for it):

* ``echomq_url`` (session): the URL of the server the tests use — the embedded Valkey (the
  ``echomq[server]`` extra) started once per session (per xdist worker), or the server named by
  ``--echomq-url`` / the ``echomq_url`` ini option.
* ``echomq_queue_name``: a queue name unique to the test (tests never flush the server).
* ``echomq_queue``: a connected :class:`echomq.Queue` of that name, deleted after the test.

``echomq_queue`` is async, so its tests are run by pytest-asyncio: in its default strict mode an
``async def`` test that asks for it is marked ``asyncio`` here (no marker, no ``asyncio_mode``
to set); without pytest-asyncio such a test fails saying what to install, not with pytest's
generic "async def functions are not natively supported".
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator, Generator, Iterator

import pytest

from echomq import Queue
from echomq.testing import discard

try:  # async fixtures under pytest-asyncio's strict mode too; plain pytest otherwise
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # pragma: no cover - depends on the user's test stack
    _async_fixture = pytest.fixture  # type: ignore[assignment]


#: The plugin's async fixtures: a test asking for one needs an async runner.
ASYNC_FIXTURES = frozenset({"echomq_queue"})
#: The markers of the async runners that can run them (pytest-asyncio's, anyio's).
RUNNERS = ("asyncio", "anyio")
NO_RUNNER = (
    "{name} asks for echomq's async fixture {fixture}, and nothing runs async tests: install "
    "pytest-asyncio (pip install pytest-asyncio); echomq marks such tests for it"
)


def _asks_async(obj: object) -> str | None:
    """The async fixture of echomq that an ``async def`` test asks for by name, if any."""
    if not inspect.iscoroutinefunction(obj):
        return None
    try:
        asked = inspect.signature(obj).parameters
    except (TypeError, ValueError):  # pragma: no cover - not a plain function
        return None
    return next((name for name in asked if name in ASYNC_FIXTURES), None)


@pytest.hookimpl(hookwrapper=True)
def pytest_pycollect_makeitem(
    collector: pytest.Collector, name: str, obj: object
) -> Generator[None, object, None]:
    # Marked before the item is made, so pytest-asyncio's strict mode converts it like a test
    # marked by hand. A test marked for a runner already keeps its marker.
    if (
        _asks_async(obj) is not None
        and collector.config.pluginmanager.has_plugin("asyncio")
        and not any(getattr(m, "name", None) in RUNNERS for m in getattr(obj, "pytestmark", []))
    ):
        pytest.mark.asyncio(obj)
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    fixture = _asks_async(getattr(item, "obj", None))
    if fixture is None or item.config.pluginmanager.has_plugin("asyncio"):
        return
    if item.get_closest_marker("anyio") is None:
        pytest.fail(NO_RUNNER.format(name=item.name, fixture=fixture), pytrace=False)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("echomq")
    help = "URL of a Valkey for echomq's fixtures (default: start the embedded one)"
    group.addoption("--echomq-url", default=None, help=help)
    parser.addini("echomq_url", help, default="")


@pytest.fixture(scope="session")
def echomq_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The server's URL: ``--echomq-url``, the ``echomq_url`` ini option, or an embedded one."""
    given = request.config.getoption("--echomq-url") or request.config.getini("echomq_url")
    if given:
        yield str(given)
        return
    from echomq.server import EmbeddedValkey  # the echomq[server] extra

    with EmbeddedValkey() as server:
        yield server.url


@pytest.fixture
def echomq_queue_name(request: pytest.FixtureRequest) -> str:
    """``t-<test name>-<random>``, cut to a valid queue name."""
    stem = "".join(c if c.isalnum() or c in "._-" else "-" for c in request.node.name)
    return f"t-{stem[:80]}-{uuid.uuid4().hex[:8]}"


@_async_fixture
async def echomq_queue(echomq_url: str, echomq_queue_name: str) -> AsyncIterator[Queue]:
    """A queue of its own for this test; every key of it is deleted afterwards."""
    queue = await Queue.connect(echomq_url, echomq_queue_name)
    try:
        yield queue
    finally:
        await discard(queue)

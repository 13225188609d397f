"""The pytest plugin of ``echomq.testing`` (registered as the ``echomq`` plugin when echomq is
installed): a real Valkey for the test session and a fresh queue for each test.

Fixtures (all lazy: nothing starts unless a test asks for it):

* ``echomq_url`` (session): the URL of the server the tests use — the embedded Valkey (the
  ``echomq[server]`` extra) started once per session (per xdist worker), or the server named by
  ``--echomq-url`` / the ``echomq_url`` ini option.
* ``echomq_queue_name``: a queue name unique to the test (tests never flush the server).
* ``echomq_queue``: a connected :class:`echomq.Queue` of that name, deleted after the test.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from echomq import Queue
from echomq.testing import discard

try:  # async fixtures under pytest-asyncio's strict mode too; plain pytest otherwise
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # pragma: no cover - depends on the user's test stack
    _async_fixture = pytest.fixture  # type: ignore[assignment]


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

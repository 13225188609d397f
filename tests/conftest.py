"""Shared fixtures: one real Valkey per test session (per xdist worker) and a queue name per test.

``ECHOMQ_TEST_URL`` points the suite at an existing server instead of starting one. Tests never
flush the server; each gets its own queue name.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import pytest

from echomq._queue import Queue
from echomq._server import EmbeddedValkey
from echomq.testing import discard


@dataclass(frozen=True, slots=True)
class ExternalValkey:
    """A server the suite did not start (``ECHOMQ_TEST_URL``); it is never stopped."""

    url: str = field(repr=False)


@pytest.fixture(scope="session")
def valkey_server() -> Iterator[EmbeddedValkey | ExternalValkey]:
    external = os.environ.get("ECHOMQ_TEST_URL")
    if external:
        yield ExternalValkey(url=external)
        return
    with EmbeddedValkey() as server:
        yield server


@pytest.fixture(scope="session")
def valkey_url(valkey_server: EmbeddedValkey | ExternalValkey) -> str:
    return valkey_server.url


@pytest.fixture
def queue_name(request: pytest.FixtureRequest) -> str:
    test_name = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:60]
    return f"t-{test_name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def queue(valkey_url: str, queue_name: str) -> AsyncIterator[Queue]:
    """A queue of its own on the session's server, discarded (every key) afterwards."""
    q = await Queue.connect(valkey_url, queue_name, pool_size=2)
    yield q
    await discard(q)

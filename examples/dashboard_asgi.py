"""The echomq dashboard mounted inside your own ASGI app, on the App's connection.

The dashboard checks its token on every write and the ``Host`` of every request; mounted, it
borrows the wire it is given and never closes it.

    ECHOMQ_URL=valkey://127.0.0.1:6379 ECHOMQ_DASHBOARD_TOKEN=... uvicorn dashboard_asgi:site
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from echomq import App
from echomq.dashboard import create_app

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="email")
TOKEN = os.environ.get("ECHOMQ_DASHBOARD_TOKEN") or secrets.token_urlsafe(24)


async def home(_: object) -> PlainTextResponse:
    return PlainTextResponse("my app; the queues are under /queues/")


@asynccontextmanager
async def lifespan(site: Starlette) -> AsyncIterator[None]:
    async with app:
        board = create_app(app.wire, ["email"], TOKEN)  # borrows the App's connection
        site.router.routes.append(Mount("/queues", app=board))
        try:
            yield
        finally:
            board.close_streams()  # an event stream never ends by itself


site = Starlette(routes=[Route("/", home)], lifespan=lifespan)

"""The Bot API over HTTP: ``/bot{token}/{method}`` (GET or POST, query, form or JSON), answered
with Telegram's envelopes and status codes, injected faults included."""

from __future__ import annotations

import asyncio
import hmac
from typing import Any

from aiohttp import web

from codemojex.telegram.sandbox.errors import BotApiError
from codemojex.telegram.sandbox.methods import METHODS, SENDS
from codemojex.telegram.sandbox.params import read_params
from codemojex.telegram.sandbox.state import STATE

_HTML_502 = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)
_TALLIED = {400: "bad_requests", 403: "forbidden", 429: "too_many_requests"}


def _envelope(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.json_response(body, status=status)


async def handle(request: web.Request) -> web.StreamResponse:
    """One Bot API call: token, method, faults, then the method itself."""
    state = request.app[STATE]
    if state.faults.latency > 0:
        # Simulated network latency: the point is the delay itself.
        await asyncio.sleep(state.faults.latency)
    token = request.match_info["token"]
    if not hmac.compare_digest(token.encode(), state.options.bot_token.encode()):
        return _envelope(BotApiError(401, "Unauthorized").envelope(), 401)
    name = request.match_info["method"].lower()
    method = METHODS.get(name)
    if method is None:
        return _envelope(BotApiError(404, "Not Found").envelope(), 404)
    try:
        params = await read_params(request)
        if name in SENDS and (fault := state.draw_fault()) is not None:
            state.tally.bump("faults")
            state.publish_stats()
            if fault == "html":
                return web.Response(status=502, text=_HTML_502, content_type="text/html")
            return _envelope(BotApiError(500, "Internal Server Error").envelope(), 500)
        result = await method(state, params)
    except BotApiError as error:
        if (counter := _TALLIED.get(error.status)) is not None:
            state.tally.bump(counter)
            state.publish_stats()
        return _envelope(error.envelope(), error.status)
    if name in SENDS:
        state.publish_stats()
    return _envelope({"ok": True, "result": result})


def add_routes(app: web.Application) -> None:
    app.router.add_route("*", "/bot{token}/{method}", handle)

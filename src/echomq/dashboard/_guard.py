"""What a dashboard action's body meets before its handler: read up to a cap and parsed as one
JSON object (the ``Host`` allow-list every request meets first is :mod:`._hosts`)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from echomq.errors import InvalidArgument

#: Bytes an action's body may hold. The largest one an action takes is ``{"value": <integer>}``,
#: a few dozen bytes; 16 KiB leaves room for any client's padding and still bounds what one
#: request makes the server hold (aiohttp's 1 MiB default is sized for uploads, which no action
#: takes).
MAX_BODY = 16 * 1024


class BodyTooLarge(Exception):
    """An action's body is over :data:`MAX_BODY`: 413."""


async def json_object(request: Request, cap: int = MAX_BODY) -> dict[str, Any]:
    """The request's body as a JSON object (an empty body is ``{}``), reading at most ``cap``
    bytes: a longer body raises :class:`BodyTooLarge` before the rest is read, a declared
    ``Content-Length`` over the cap before any of it is. Anything that is not one JSON object
    (malformed, not UTF-8, nested too deep for the parser) raises ``InvalidArgument``."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise InvalidArgument("Content-Length", declared[:20], "must be a whole number")
        if int(declared) > cap:
            raise BodyTooLarge()
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > cap:  # a chunked body declares no length: count what arrives
            raise BodyTooLarge()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except ValueError:  # UnicodeDecodeError is one too
        raise InvalidArgument("body", bytes(raw[:80]), "must be a JSON object") from None
    except RecursionError:  # a deep document ("[[[[…") exhausts the parser's stack
        reason = "must be a JSON object (this one is nested too deep to parse)"
        raise InvalidArgument("body", bytes(raw[:80]), reason) from None
    if not isinstance(body, dict):
        raise InvalidArgument("body", type(body).__name__, "must be a JSON object")
    return body

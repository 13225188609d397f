"""What every request to the sandbox meets before a handler (Bot API, chat page and control API
alike): the ``Host`` allow-list against DNS rebinding; and the one way its handlers parse JSON,
where a document too deep for the parser is bad input like any malformed one, never a 500.

A page on a name the attacker controls can point that name at 127.0.0.1 and read the sandbox as
its own origin (the chat page's history, the users); its requests still carry the attacker's
name in ``Host``, which is what the allow-list (echomq's :class:`~echomq.dashboard.Hosts`, the
dashboard's own) refuses. Bodies are capped by aiohttp (1 MiB, 413 beyond), which is ample for
a Bot API call or a chat line.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from echomq.dashboard import Hosts


def host_check(hosts: Hosts) -> Middleware:
    """An aiohttp middleware that answers 421 to a request naming a ``Host`` not in ``hosts``,
    before any handler runs or any of its body is read."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not hosts.allows(request.headers.get("Host")):
            # 421 Misdirected Request, not 403: the request is addressed to a name this server
            # does not serve (403 here already means a wrong control token or a blocked user).
            return web.json_response(
                {
                    "ok": False,
                    "error_code": 421,
                    "description": "Misdirected Request: the sandbox does not answer to that "
                    "Host (see SandboxOptions.hosts)",
                },
                status=421,
            )
        return await handler(request)

    return check


class NestedTooDeep(ValueError):
    """A JSON document nested deeper than the parser goes (Python raises ``RecursionError``)."""


def parse_json(text: str | bytes) -> Any:
    """``json.loads``; ``ValueError`` for anything that is not JSON, :class:`NestedTooDeep`
    for a document like ``[[[[…`` that would otherwise escape as a ``RecursionError``."""
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeep("the JSON is nested too deep to parse") from None


async def read_json(request: web.Request) -> Any:
    """The request's body as JSON, as :func:`parse_json` (the charset's decoding errors are
    ``ValueError`` too). aiohttp answers 413 to a body over its 1 MiB cap."""
    return parse_json(await request.text())

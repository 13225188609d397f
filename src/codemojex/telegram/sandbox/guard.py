"""What every request to the sandbox meets before a handler (Bot API, chat page and control API
alike): the ``Host`` allow-list against DNS rebinding; and the one way its handlers parse JSON,
where a document too deep for the parser is bad input like any malformed one, never a 500.

A page on a name the attacker controls can point that name at 127.0.0.1 and read the sandbox as
its own origin (the chat page's history, the users); its requests still carry the attacker's
name in ``Host``, which is what the allow-list refuses. Bodies are capped by aiohttp (1 MiB,
413 beyond), which is ample for a Bot API call or a chat line.
"""

from __future__ import annotations

import ipaddress
import json
import string
from collections.abc import Iterable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
"""The names a browser or bot on this machine uses; IP literals are allowed besides."""

_NAME_CHARACTERS = frozenset(string.ascii_lowercase + string.digits + ".-_")


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header (or a bare host name), lower case, without the port, the
    IPv6 brackets or a final dot; ``None`` when it is not one."""
    header = header.strip().lower()
    if _is_ip_literal(header):  # a bare IPv6 address, as SandboxOptions(host="::") binds
        return header
    if header.startswith("["):
        name, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name or None
    name, colon, port = header.partition(":")
    if colon and not port.isdigit():
        return None
    name = name.removesuffix(".")
    return name or None


def _is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class Hosts:
    """The ``Host`` names the sandbox answers to: the loopback names, any IP address literal,
    the host it binds and ``SandboxOptions.hosts``.

    An IP literal is safe to accept: DNS rebinding needs a name the attacker's DNS answers for,
    and a browser sends that name, never the address it resolved to. Accepting them keeps a
    sandbox bound to 0.0.0.0 reachable at ``http://<its address>:<port>``.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._names = set(LOOPBACK_NAMES)
        for name in names:
            shown = host_name(name)
            if shown is None or not (_is_ip_literal(shown) or set(shown) <= _NAME_CHARACTERS):
                raise ValueError(f"{name!r} is not a host name")
            self._names.add(shown)

    def allows(self, header: str | None) -> bool:
        """Whether a request with this ``Host`` header (``None``: none sent) is served."""
        name = host_name(header) if header is not None else None
        return name is not None and (name in self._names or _is_ip_literal(name))


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

"""What a request meets before any dashboard handler: the ``Host`` allow-list (against DNS
rebinding), and for the actions a body read up to a cap and parsed as one JSON object.

A page on a name the attacker controls can point that name at 127.0.0.1 and then read the
dashboard as its own origin; its requests still carry the attacker's name in ``Host``, which is
what the allow-list refuses.
"""

from __future__ import annotations

import ipaddress
import json
import string
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request

from .._errors import InvalidArgument

#: Bytes an action's body may hold. The largest one an action takes is ``{"value": <integer>}``,
#: a few dozen bytes; 16 KiB leaves room for any client's padding and still bounds what one
#: request makes the server hold (aiohttp's 1 MiB default is sized for uploads, which no action
#: takes).
MAX_BODY = 16 * 1024

#: The names a browser on this machine uses; IP literals are allowed besides (see Hosts).
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


_NAME_CHARACTERS = frozenset(string.ascii_lowercase + string.digits + ".-_")


class BodyTooLarge(Exception):
    """An action's body is over :data:`MAX_BODY`: 413."""


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header (or a bare host name), lower case, without the port, the
    IPv6 brackets or a final dot; ``None`` when it is not one."""
    header = header.strip().lower()
    if _is_ip_literal(header):  # a bare IPv6 address, as ``serving(app, "::")`` binds
        return header
    if header.startswith("["):
        name, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name or None
    name, colon, port = header.partition(":")
    if colon and not port.isdigit():  # also refuses an unbracketed IPv6 address
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
    """The ``Host`` names a dashboard answers to: the loopback names, any IP address literal,
    and the names it was given (``create_app(hosts=…)``) or bound to (``serving``).

    An IP literal is safe to accept: DNS rebinding needs a name the attacker's DNS answers for,
    and a browser sends that name, never the address it resolved to. Accepting them keeps a
    dashboard bound to 0.0.0.0 reachable at ``http://<its address>:<port>``.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._names = set(LOOPBACK_NAMES)
        for name in names:
            self.allow(name)

    def allow(self, name: str) -> None:
        """Answer to ``name`` too (a host name, with or without a port)."""
        shown = host_name(name) if isinstance(name, str) else None
        if shown is None or not (_is_ip_literal(shown) or set(shown) <= _NAME_CHARACTERS):
            raise InvalidArgument("hosts", name, "expected host names such as 'ops.example.org'")
        self._names.add(shown)

    def allows(self, header: str | None) -> bool:
        """Whether a request with this ``Host`` header (``None``: none sent) is served."""
        name = host_name(header) if header is not None else None
        return name is not None and (name in self._names or _is_ip_literal(name))


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

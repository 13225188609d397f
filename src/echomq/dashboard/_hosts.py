"""The ``Host`` allow-list a local HTTP server meets every request with, against DNS rebinding:
the dashboard's, and any server of an application's (codemojex's sandbox Bot API uses it).

A page on a name the attacker controls can point that name at 127.0.0.1 and then read the
server as its own origin; its requests still carry the attacker's name in ``Host``, which is
what the allow-list refuses. Standard library only, so a server on any framework can use it.
"""

from __future__ import annotations

import ipaddress
import string
from collections.abc import Iterable

from echomq.errors import InvalidArgument

#: The names a browser on this machine uses; IP literals are allowed besides (see Hosts).
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


_NAME_CHARACTERS = frozenset(string.ascii_lowercase + string.digits + ".-_")


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
    """The ``Host`` names a server answers to: the loopback names, any IP address literal, and
    the names it was given (a dashboard: ``create_app(hosts=…)``, or the host ``serving``
    binds). A name that is not a host name is an :class:`~echomq.InvalidArgument` (``hosts``).

    An IP literal is safe to accept: DNS rebinding needs a name the attacker's DNS answers for,
    and a browser sends that name, never the address it resolved to. Accepting them keeps a
    server bound to 0.0.0.0 reachable at ``http://<its address>:<port>``.
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

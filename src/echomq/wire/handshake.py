"""The handshake every new connection runs, the same on the asyncio and the blocking wire.

The TLS context a ``rediss://`` URL asks for (its CA, or no verification); then ``HELLO 3``
(with ``AUTH`` and ``SETNAME`` as the options say), ``SELECT`` a database other than 0, and the
wire-version fence ``SET {emq}:version <version> NX GET``; then how its replies read: an auth
refusal, any other refusal, or another version in the fence is a typed error.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any, Final

from echomq.errors import AuthError, ConnectError, ServerError, VersionFenceError
from echomq.wire.slots import VERSION_KEY
from echomq.wire.url import ConnectionOptions

_AUTH_WORDS: Final = ("WRONGPASS", "NOAUTH", "invalid password", "invalid username-password")


def tls_context(options: ConnectionOptions) -> ssl.SSLContext | None:
    """The TLS context of ``options``: None for a plain connection; ``tls_ca_file`` trusts a
    private CA, ``tls_verify=False`` skips the certificate and host name checks."""
    if not options.tls:
        return None
    context = ssl.create_default_context(cafile=options.tls_ca_file)
    if not options.tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def handshake(options: ConnectionOptions, fence: str | None) -> list[tuple[Any, ...]]:
    """The commands of the handshake, pipelined in this order; the fence last when given."""
    hello: list[Any] = ["HELLO", 3]
    if options.password is not None:
        hello += ["AUTH", options.username or "default", options.password]
    if options.client_name:
        hello += ["SETNAME", options.client_name]
    commands: list[tuple[Any, ...]] = [tuple(hello)]
    if options.db:
        commands.append(("SELECT", options.db))
    if fence is not None:
        commands.append(("SET", VERSION_KEY, fence, "NX", "GET"))
    return commands


def check_handshake(replies: Sequence[Any], fence: str | None, address: str) -> None:
    """Raise the typed error of a refused handshake (replies as :class:`ServerError` values)."""
    for reply in replies:
        if isinstance(reply, ServerError):
            if any(word in reply.message for word in _AUTH_WORDS):
                raise AuthError(f"authentication refused: {reply.message}", address=address)
            raise ConnectError(f"handshake refused: {reply.message}", address=address)
    if fence is not None:
        check_fence(replies[-1], fence, address)


def check_fence(found: bytes | None, fence: str, address: str) -> None:
    """The fence's ``SET … NX GET`` reply: None (we set it) or our version, else refused."""
    if found is not None and found.decode() != fence:
        raise VersionFenceError(fence, found.decode(), address=address)

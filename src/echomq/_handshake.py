"""The handshake every new connection runs, the same on the asyncio and the blocking wire.

``HELLO 3`` (with ``AUTH`` and ``SETNAME`` as the options say), ``SELECT`` a database other than
0, and the wire-version fence ``SET {emq}:version <version> NX GET``; then how its replies read:
an auth refusal, any other refusal, or another version in the fence is a typed error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ._errors import AuthError, ConnectError, ServerError, VersionFenceError
from ._keys import VERSION_KEY
from ._url import ConnectionOptions

_AUTH_WORDS: Final = ("WRONGPASS", "NOAUTH", "invalid password", "invalid username-password")


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

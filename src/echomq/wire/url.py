"""Connection options and the URL syntax that names a server.

``valkey://[user[:password]@]host[:port][/db][?name=…&connect_timeout=…&call_timeout=…]``;
``valkey://host1:port1,host2:port2/`` names seed nodes of one cluster; ``redis://`` is the same;
``valkeys://`` and ``rediss://`` add TLS (``?ca=/path/ca.pem`` trusts a
private CA, ``?verify=none`` skips certificate checks). The password never appears in a repr.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from echomq.errors import InvalidArgument

PLAIN_SCHEMES = frozenset({"valkey", "redis"})
TLS_SCHEMES = frozenset({"valkeys", "rediss"})
DEFAULT_PORT = 6379


@dataclass(frozen=True, slots=True)
class ConnectionOptions:
    """Where and how to connect. Durations are seconds."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    db: int = 0
    tls: bool = False
    tls_ca_file: str | None = None
    tls_verify: bool = True
    client_name: str | None = None
    connect_timeout: float = 3.0
    call_timeout: float = 5.0

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'tls://' if self.tls else ''}{host}:{self.port}"

    def replace(self, **changes: object) -> ConnectionOptions:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_url(cls, url: str, **overrides: object) -> ConnectionOptions:
        """Parse a ``valkey://`` / ``redis://`` / ``rediss://`` URL; keyword overrides win."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in PLAIN_SCHEMES | TLS_SCHEMES:
            raise InvalidArgument(
                "url", _redact(url), "scheme must be valkey://, redis://, valkeys:// or rediss://"
            )
        try:
            port = parts.port or DEFAULT_PORT
        except ValueError as exc:
            raise InvalidArgument("url", _redact(url), f"bad port ({exc})") from None
        path = parts.path.strip("/")
        if path and not path.isdigit():
            raise InvalidArgument("url", _redact(url), "the path must be a database number")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        options = cls(
            host=parts.hostname or "127.0.0.1",
            port=port,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password is not None else None,
            db=int(path) if path else 0,
            tls=scheme in TLS_SCHEMES,
            tls_ca_file=query.get("ca"),
            tls_verify=query.get("verify", "full") != "none",
            client_name=query.get("name"),
            connect_timeout=_seconds(url, query, "connect_timeout", 3.0),
            call_timeout=_seconds(url, query, "call_timeout", 5.0),
        )
        return options.replace(**overrides) if overrides else options


def seeds_from_url(url: str, **overrides: object) -> list[ConnectionOptions]:
    """One :class:`ConnectionOptions` per host of ``url``: ``h1:p1,h2:p2`` names cluster seeds.

    Every seed shares the URL's credentials, database, TLS and query options.
    """
    if not isinstance(url, str):
        raise InvalidArgument("url", type(url).__name__, "must be a str, like valkey://host:6379")
    parts = urlsplit(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if "," not in hosts:
        return [ConnectionOptions.from_url(url, **overrides)]
    seeds = []
    for host in hosts.split(","):
        if not host.strip():
            raise InvalidArgument("url", _redact(url), "an empty host in the seed list")
        netloc = f"{userinfo}{at}{host.strip()}"
        seed_url = parts._replace(netloc=netloc).geturl()
        seeds.append(ConnectionOptions.from_url(seed_url, **overrides))
    return seeds


def _seconds(url: str, query: dict[str, str], name: str, default: float) -> float:
    raw = query.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise InvalidArgument("url", _redact(url), f"{name} must be a positive number of seconds")
    return value


def _redact(url: str) -> str:
    """The URL with its password replaced, safe to put in an error message or a log."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


redact_url = _redact

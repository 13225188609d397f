"""Connection URLs: every scheme, credentials, database, TLS options; secrets never shown."""

from __future__ import annotations

import pytest

from echomq.errors import InvalidArgument
from echomq.wire.url import ConnectionOptions


@pytest.mark.parametrize(
    ("url", "tls"),
    [("valkey://h:7000", False), ("redis://h:7000", False), ("rediss://h:7000", True),
     ("valkeys://h:7000", True)],
)  # fmt: skip
def test_every_scheme_names_host_port_and_tls(url: str, tls: bool) -> None:
    options = ConnectionOptions.from_url(url)
    assert (options.host, options.port, options.tls) == ("h", 7000, tls)


def test_credentials_database_and_options_are_read() -> None:
    options = ConnectionOptions.from_url(
        "rediss://worker:p%40ss@10.0.0.5:6380/3?name=w1&ca=/etc/ca.pem&call_timeout=2.5"
    )
    assert (options.username, options.password, options.db) == ("worker", "p@ss", 3)
    assert (options.client_name, options.tls_ca_file, options.call_timeout) == (
        "w1",
        "/etc/ca.pem",
        2.5,
    )
    assert options.tls_verify
    assert not ConnectionOptions.from_url("rediss://h?verify=none").tls_verify


def test_defaults_and_password_only_url() -> None:
    options = ConnectionOptions.from_url("valkey://:secret@localhost")
    assert (options.port, options.db, options.username, options.password) == (
        6379,
        0,
        None,
        "secret",
    )


def test_the_password_never_appears_in_a_repr_or_an_error() -> None:
    options = ConnectionOptions.from_url("valkey://u:hunter2@h:1/0")
    assert "hunter2" not in repr(options)
    with pytest.raises(InvalidArgument) as info:
        ConnectionOptions.from_url("valkey://u:hunter2@h:1/x")
    assert "hunter2" not in str(info.value)
    assert "***" in str(info.value)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://h:1", "scheme must be valkey://, redis://, valkeys:// or rediss://"),
        ("valkey://h:99999", "bad port"),
        ("valkey://h:1/abc", "the path must be a database number"),
        ("valkey://h?connect_timeout=0", "connect_timeout must be a positive number of seconds"),
    ],
)
def test_bad_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        ConnectionOptions.from_url(url)

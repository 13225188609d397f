"""rediss:// through a real TLS terminator (stunnel) in front of the embedded server."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from echomq.errors import ConnectError
from echomq.wire.connector import Connector
from echomq.wire.url import ConnectionOptions

# The wire over TLS on asyncio's event loop and on uvloop's (tests/conftest.py).
pytestmark = pytest.mark.every_loop


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _make_certs(folder: Path) -> None:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
             "-keyout", "ca.key", "-out", "ca.pem", cwd=folder)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", "server.key", "-out", "server.csr", cwd=folder)  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.pem",
             cwd=folder)  # fmt: skip
    # A second CA that signed nothing here: trusting it must fail the handshake.
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=other",
             "-keyout", "other.key", "-out", "other.pem", cwd=folder)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def tls_port(valkey_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    binary = shutil.which("stunnel4") or shutil.which("stunnel")
    assert binary, "stunnel4 is required for the TLS test: apt-get install stunnel4"
    folder = tmp_path_factory.mktemp("tls")
    _make_certs(folder)
    backend = ConnectionOptions.from_url(valkey_url)
    port = _free_port()
    (folder / "stunnel.conf").write_text(
        "foreground = yes\n"
        f"output = {folder / 'stunnel.log'}\n"
        "[valkey]\n"
        f"accept = 127.0.0.1:{port}\n"
        f"connect = {backend.host}:{backend.port}\n"
        f"cert = {folder / 'server.pem'}\n"
        f"key = {folder / 'server.key'}\n"
    )
    proc = subprocess.Popen([binary, str(folder / "stunnel.conf")])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, (
                    "stunnel exited: " + (folder / "stunnel.log").read_text()
                )
                assert time.monotonic() < deadline, "stunnel never listened"
                time.sleep(0.02)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def tls_url(tls_port: int, valkey_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    backend = ConnectionOptions.from_url(valkey_url)
    auth = f":{backend.password}@" if backend.password else ""
    return f"rediss://{auth}127.0.0.1:{tls_port}/0"


async def test_rediss_url_talks_through_tls_with_a_trusted_ca(
    tls_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ca = next(tmp_path_factory.getbasetemp().glob("tls*/ca.pem"))
    opts = ConnectionOptions.from_url(f"{tls_url}?ca={ca}")
    assert opts.tls
    async with Connector(opts) as conn:
        assert await conn.call("PING") == b"PONG"
        replies = await conn.call_many([("ECHO", str(n)) for n in range(100)])
        assert replies == [str(n).encode() for n in range(100)]


async def test_rediss_refuses_a_server_signed_by_an_untrusted_ca(
    tls_url: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    other = next(tmp_path_factory.getbasetemp().glob("tls*/other.pem"))
    with pytest.raises(ConnectError, match="TLS handshake failed"):
        await Connector(ConnectionOptions.from_url(f"{tls_url}?ca={other}")).connect()

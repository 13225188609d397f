"""The embedded server against real processes: start-up, auth, AOF, stop, and no orphan on any exit.

Waiting on a process is a poll with a deadline, never a bare sleep.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from echomq.server import EmbeddedValkey, ServerOptions, ServerStartError

DEADLINE = 10.0  # seconds a process gets to come and go


def call(host: str, port: int, *commands: tuple[str, ...]) -> list[bytes]:
    """Send each command as a RESP array on one raw socket; the replies, first line (or bulk)."""
    with socket.create_connection((host, port), timeout=5) as sock:
        payload = b""
        for args in commands:
            payload += b"*%d\r\n" % len(args)
            for arg in args:
                data = arg.encode()
                payload += b"$%d\r\n%s\r\n" % (len(data), data)
        sock.sendall(payload)
        buffer = b""
        replies: list[bytes] = []
        while len(replies) < len(commands):
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {replies}"
            buffer += chunk
            while b"\r\n" in buffer and len(replies) < len(commands):
                line, rest = buffer.split(b"\r\n", 1)
                if line.startswith(b"$") and int(line[1:]) >= 0:
                    size = int(line[1:])
                    if len(rest) < size + 2:
                        break
                    replies.append(rest[:size])
                    buffer = rest[size + 2 :]
                else:
                    replies.append(line)
                    buffer = rest
    return replies


def is_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie nobody reaped yet counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        # The state letter follows the parenthesised command name, which may hold spaces.
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (not Linux): kill(pid, 0) succeeding is all we know


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def child_script(data_dir: Path, then: str) -> str:
    """Python for a child that starts a server, prints its pid, then does ``then``."""
    return (
        "import os, signal, sys, time\n"
        "from pathlib import Path\n"
        "from echomq.server import EmbeddedValkey, ServerOptions\n"
        f"server = EmbeddedValkey(ServerOptions(data_dir=Path({str(data_dir)!r}))).start()\n"
        "print(server.pid, flush=True)\n"
        f"{then}\n"
    )


def test_server_starts_and_answers_ping_on_loopback() -> None:
    with EmbeddedValkey() as server:
        assert server.host == "127.0.0.1"
        assert 20000 <= server.port <= 55535
        assert server.pid is not None
        assert server.url == f"valkey://127.0.0.1:{server.port}/0"
        assert call(server.host, server.port, ("PING",)) == [b"+PONG"]
        assert server.data_dir.is_dir()


def test_version_is_valkey_9() -> None:
    with EmbeddedValkey() as server:
        assert server.version.split(".")[0] == "9"
    assert EmbeddedValkey().version == server.version  # the --version path agrees with INFO


def test_session_fixture_server_answers_ping(valkey_url: str) -> None:
    from echomq.wire.url import ConnectionOptions

    options = ConnectionOptions.from_url(valkey_url)
    commands: list[tuple[str, ...]] = [("PING",)]
    if options.password is not None:
        commands.insert(0, ("AUTH", options.password))
    assert call(options.host, options.port, *commands)[-1] == b"+PONG"


def test_queue_name_is_unique_and_legal(queue_name: str) -> None:
    from echomq.engine.keys import validate_queue

    assert validate_queue(queue_name) == queue_name
    assert queue_name.startswith("t-test_queue_name_is_unique_and_legal-")


def test_password_is_required_and_kept_out_of_the_repr() -> None:
    password = 's3cret pass"word\\'
    with EmbeddedValkey(ServerOptions(password=password)) as server:
        noauth = call(server.host, server.port, ("PING",))
        assert noauth[0].startswith(b"-NOAUTH")
        assert call(server.host, server.port, ("AUTH", password), ("PING",)) == [
            b"+OK",
            b"+PONG",
        ]
        assert "s3cret" not in repr(server)
        assert "s3cret" not in repr(ServerOptions(password=password))
        assert server.url.startswith("valkey://:s3cret%20pass%22word%5C@127.0.0.1:")
        assert (server.data_dir / "valkey.conf").stat().st_mode & 0o077 == 0
        assert "s3cret" not in (server.data_dir / "valkey.log").read_text()


def test_appendonly_data_survives_a_restart_on_the_same_dir(tmp_path: Path) -> None:
    options = ServerOptions(data_dir=tmp_path, appendonly=True)
    with EmbeddedValkey(options) as server:
        assert call(server.host, server.port, ("SET", "survivor", "still here")) == [b"+OK"]
    assert (tmp_path / "appendonlydir").is_dir()
    with EmbeddedValkey(options) as server:
        assert call(server.host, server.port, ("GET", "survivor")) == [b"still here"]


def test_stop_ends_the_process_and_frees_the_port() -> None:
    server = EmbeddedValkey().start()
    pid, port, data_dir = server.pid, server.port, server.data_dir
    assert pid is not None
    server.stop()
    assert server.pid is None
    assert not is_alive(pid)
    assert not data_dir.exists()  # a temporary data directory goes with the server
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))  # nothing listens there any more


def test_stop_is_idempotent_and_start_after_stop_works(tmp_path: Path) -> None:
    server = EmbeddedValkey(ServerOptions(data_dir=tmp_path))
    server.stop()  # never started
    server.start()
    server.stop()
    server.stop()
    assert tmp_path.is_dir()  # a given data directory is kept
    with server:
        assert call(server.host, server.port, ("PING",)) == [b"+PONG"]
    assert server.pid is None


def test_a_bad_directive_fails_start_with_the_log_tail(tmp_path: Path) -> None:
    options = ServerOptions(
        data_dir=tmp_path, password="hunter2-secret", extra=(("no-such-directive", "1"),)
    )
    server = EmbeddedValkey(options)
    with pytest.raises(ServerStartError) as caught:
        server.start()
    message = str(caught.value)
    assert "no-such-directive" in message
    assert "Bad directive" in caught.value.log_tail
    assert caught.value.returncode not in (None, 0)
    assert "hunter2-secret" not in message
    assert server.pid is None


def test_server_dies_with_its_parent_killed_by_sigkill(tmp_path: Path) -> None:
    script = child_script(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    server_pid = int(child.stdout.split()[0])
    wait_for(lambda: not is_alive(server_pid), f"server pid {server_pid} to exit")


def test_ctrl_c_to_the_parent_stops_the_server_in_order(tmp_path: Path) -> None:
    script = child_script(tmp_path, "time.sleep(60)")
    # Its own session, so SIGINT to its process group is what a terminal's Ctrl-C would send.
    with subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as child:
        assert child.stdout is not None
        server_pid = int(child.stdout.readline())
        assert is_alive(server_pid)
        os.killpg(child.pid, signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
    assert "KeyboardInterrupt" in stderr
    wait_for(lambda: not is_alive(server_pid), f"server pid {server_pid} to exit")
    log = (tmp_path / "valkey.log").read_text()
    # The parent's atexit stop (SIGTERM) ended it, not the terminal's SIGINT.
    assert "SIGTERM" in log
    assert "SIGINT" not in log


def test_python_m_echomq_server_runs_one_in_the_foreground_until_sigterm() -> None:
    """The README's and getting started's `python -m echomq.server`, as a user runs it."""
    command = [sys.executable, "-m", "echomq.server", "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            ready = process.stdout.readline()  # written once the server answered a PING
            assert ready.startswith("valkey ready: valkey://127.0.0.1:"), ready
            address = ready.split()[2].removeprefix("valkey://").removesuffix("/0")
            host, port = address.split(":")
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(b"PING\r\n")
                assert sock.recv(16) == b"+PONG\r\n"
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()

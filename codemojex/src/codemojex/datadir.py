"""The data directory of one running codemojex: where the embedded Valkey keeps its AOF, where the
SQLite database lives, and the lock that keeps a second instance from starting on the same files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from codemojex.domain import CodemojexError
from codemojex.store import sqlite_url
from codemojex.telegram.sandbox.archive import TOKEN_PATTERN, write_private

LOCK_FILE = "codemojex.pid"
DATABASE_FILE = "codemojex.db"
DASHBOARD_TOKEN_FILE = "dashboard.token"  # noqa: S105 (a file name, not a secret)


class AlreadyRunning(CodemojexError):
    """Another codemojex holds the data directory (``pid`` when it could be read)."""

    def __init__(self, root: Path, pid: int | None) -> None:
        self.root = root
        self.pid = pid
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"codemojex is already running on {root} ({who}): stop it first (Ctrl-C in its "
            "terminal), or give this one its own --data-dir",
            reason="already_running",
        )


@dataclass(frozen=True, slots=True)
class DataDir:
    """The files of one instance under ``root``."""

    root: Path

    @property
    def valkey(self) -> Path:
        """The embedded Valkey's directory (config, AOF, log)."""
        return self.root / "valkey"

    @property
    def sandbox(self) -> Path:
        """The sandbox's chats and its chat page's token (kept across restarts)."""
        return self.root / "sandbox"

    @property
    def database_url(self) -> str:
        """The SQLite system of record in this directory."""
        return sqlite_url(self.root / DATABASE_FILE)

    def dashboard_token(self) -> str:
        """The dashboard's token, kept in this directory (``0600``) like the chat page's, so a
        tab left open across a restart keeps acting; minted and written on the first call."""
        path = self.root / DASHBOARD_TOKEN_FILE
        try:
            kept = path.read_text().strip()
        except FileNotFoundError:
            kept = ""
        if TOKEN_PATTERN.fullmatch(kept):
            os.chmod(path, 0o600)  # a secret: the owner's alone, whatever made it
            return kept
        token = secrets.token_urlsafe(18)
        self.root.mkdir(parents=True, exist_ok=True)
        write_private(path, (token + "\n").encode())
        return token

    @contextlib.contextmanager
    def locked(self) -> Iterator[DataDir]:
        """Hold the directory for this process; :class:`AlreadyRunning` if another holds it.

        An advisory ``flock`` on the pid file: the kernel drops it when the holder dies, so a
        crashed run never leaves a stale lock behind.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / LOCK_FILE
        handle = path.open("a+")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                text = handle.read().strip()
                raise AlreadyRunning(self.root, int(text) if text.isdigit() else None) from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            try:
                yield self
            finally:
                handle.seek(0)
                handle.truncate()
                fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            handle.close()

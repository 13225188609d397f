"""What a sandbox keeps in its data directory across restarts: its control token
(``tokens.json``, so the chat page's link goes on working) and its world (``chats.json``: users,
chats, every message, who blocked the bot). Both files are the owner's alone (mode 0600, in a
0700 directory) and written atomically (a temporary file, fsync, rename), so a crash leaves the
old file or the new one, never half of one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Any

from codemojex.telegram.sandbox.errors import SandboxError
from codemojex.telegram.sandbox.state import State

TOKENS_FILE = "tokens.json"
CHATS_FILE = "chats.json"
FORMAT = 1
"""The layout of ``chats.json``; a file of another layout is refused, never guessed at."""

_MAX_TOKENS_BYTES = 64 * 1024
_MAX_CHATS_BYTES = 256 * 1024 * 1024
#: What a kept token may look like (a file edited by hand into anything else is minted anew).
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,256}")
_COALESCE = 0.25
"""Seconds a change waits for the ones after it, so a burst of sends is one write."""
_IDLE = 5.0
"""Seconds between looks at the world when nothing woke the keeper (a missed wake-up costs no
more than this)."""

log = logging.getLogger("codemojex.sandbox")


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, readable and writable by the owner only."""
    # mkstemp creates the file 0600 whatever the umask, so the data is never readable by others,
    # not even for the moment before a chmod.
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)


class Archive:
    """The sandbox's files under ``root`` (created 0700 on first use)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def tokens(self) -> Path:
        return self.root / TOKENS_FILE

    @property
    def chats(self) -> Path:
        return self.root / CHATS_FILE

    def control_token(self) -> str:
        """The kept control token; a new random one, written down, when none is kept yet."""
        raw = self._read(self.tokens, _MAX_TOKENS_BYTES)
        if raw is None:
            token = secrets.token_urlsafe(18)
            self._write(self.tokens, json.dumps({"control_token": token}).encode())
            return token
        try:
            kept: Any = json.loads(raw)["control_token"]
        except (ValueError, TypeError, KeyError):
            kept = None
        if not isinstance(kept, str) or not TOKEN_PATTERN.fullmatch(kept):
            raise self._refuse(self.tokens, "it does not hold a control token")
        return kept

    def load(self, state: State) -> None:
        """Put the kept world (if any) in ``state``; :class:`SandboxError` for a file that is
        not one this sandbox wrote."""
        raw = self._read(self.chats, _MAX_CHATS_BYTES)
        if raw is None:
            return
        try:
            kept = json.loads(raw)
            if not isinstance(kept, dict) or kept.get("format") != FORMAT:
                raise ValueError(f"not format {FORMAT}")
            blocked = {int(user) for user in kept["blocked"]}
            state.world.restore(kept["world"])
        except (ValueError, TypeError, KeyError, RecursionError) as error:
            raise self._refuse(self.chats, f"it is not a sandbox's chats ({error})") from None
        state.blocked = blocked

    @staticmethod
    def encode(state: State) -> bytes:
        """The world as it is now, ready for :meth:`save` (which may run in another thread)."""
        kept = {"format": FORMAT, "blocked": sorted(state.blocked), "world": state.world.snapshot()}
        return json.dumps(kept, ensure_ascii=False, separators=(",", ":")).encode()

    def save(self, data: bytes) -> None:
        self._write(self.chats, data)

    def _write(self, path: Path, data: bytes) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(path, data)

    def _read(self, path: Path, limit: int) -> bytes | None:
        """The file's bytes, None when it does not exist; a file others could read is made the
        owner's alone first (it holds a secret or private chats)."""
        try:
            info = path.stat()
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise self._refuse(path, "it is not a regular file")
        if info.st_size > limit:
            raise self._refuse(path, f"it is larger than {limit} bytes")
        if info.st_mode & 0o077:
            log.warning("%s was readable by others: it is now the owner's alone (0600)", path)
            os.chmod(path, 0o600)
        return path.read_bytes()

    @staticmethod
    def _refuse(path: Path, why: str) -> SandboxError:
        return SandboxError(
            f"the sandbox cannot use {path}: {why}; move it away to start afresh", reason="data"
        )


async def keep_forever(state: State, archive: Archive, saved: int, stopped: asyncio.Event) -> None:
    """Write the world out soon after each change since revision ``saved`` (the one on disk),
    and once more once ``stopped`` is set (the sandbox sets it when its server is closed, so no
    request can change the world after, and wakes the world). This task is awaited, never
    cancelled: the last write is never cut short and never races another."""
    while True:
        closing = stopped.is_set()
        if state.world.revision != saved:
            if not closing:
                await asyncio.sleep(_COALESCE)
            revision = state.world.revision
            try:
                await asyncio.to_thread(archive.save, archive.encode(state))
                saved = revision
            except (OSError, TypeError, ValueError) as error:  # a full disk, say: try again later
                log.warning("the sandbox could not keep its chats in %s: %s", archive.chats, error)
        if closing:
            return
        await state.world.wake.wait(_IDLE)

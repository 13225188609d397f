"""A script as the wire calls it: its name, Lua source and SHA-1, and its ``EVALSHA`` command.
The engine's registry (echomq.engine.scripts) reads and links the sources; the wire only needs
the value to send it and to load it after a ``NOSCRIPT``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from echomq.wire.connector import Arg


@dataclass(frozen=True, slots=True)
class Script:
    """One Lua transition: its name (the file stem), source and lowercase hex SHA-1."""

    name: str
    source: str
    sha: str

    @classmethod
    def from_source(cls, name: str, source: str) -> Script:
        return cls(name, source, hashlib.sha1(source.encode()).hexdigest())  # noqa: S324

    def head(self, keys: Sequence[Arg]) -> tuple[Arg, ...]:
        """The call's words before its ``ARGV``: ``EVALSHA``, the SHA and the keys."""
        return ("EVALSHA", self.sha, len(keys), *keys)

    def command(self, keys: Sequence[Arg], args: Sequence[Arg]) -> tuple[Arg, ...]:
        return ("EVALSHA", self.sha, len(keys), *keys, *args)

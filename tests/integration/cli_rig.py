"""The ``echomq`` command line run from a test: ``cli(*argv)`` runs it in a thread (it runs its
own event loop) against the session's server and returns what it printed and its exit code."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest

from echomq.cli import main


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


class Cli:
    """Runs ``echomq`` in a thread (it runs its own event loop) and captures its output."""

    def __init__(self, url: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.url = url
        self.capsys = capsys

    async def __call__(self, *argv: str) -> Ran:
        self.capsys.readouterr()
        code = await asyncio.to_thread(main, ["--url", self.url, *argv])
        out, err = self.capsys.readouterr()
        return Ran(code, out, err)


@pytest.fixture(name="cli")
def cli_fixture(valkey_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(valkey_url, capsys)

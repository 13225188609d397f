"""The ``echomq`` command as a user starts it: ``python -m echomq``, ``--version``, and a worker
naming a handler module in the folder it is started from (checked before any connection)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import echomq

ECHOMQ = Path(sys.executable).with_name("echomq")


def test_python_m_echomq_prints_the_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "echomq", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == f"echomq {echomq.__version__}"


def test_the_worker_imports_a_handler_module_from_the_current_folder(tmp_path: Path) -> None:
    (tmp_path / "emailapp.py").write_text("async def send(job):\n    return None\n")
    done = subprocess.run(
        [str(ECHOMQ), "--url", "valkey://127.0.0.1:1", "worker", "emailapp:nope", "--queue", "q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    # Imported (so it could tell the attribute is missing), refused before connecting.
    assert done.returncode == 2
    assert "emailapp has no attribute nope" in done.stderr

"""The data directory lock: a second instance is told who holds it; a dead holder frees it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from codemojex.datadir import AlreadyRunning, DataDir

HOLDER = """
import sys
from pathlib import Path
from codemojex.datadir import DataDir
with DataDir(Path(sys.argv[1])).locked():
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_second_instance_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "locked\n"
        with (
            pytest.raises(AlreadyRunning, match="already running") as refused,
            DataDir(tmp_path).locked(),
        ):
            pass
        assert refused.value.pid == holder.pid
        assert refused.value.reason == "already_running"
    finally:
        holder.kill()
        holder.wait()
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()
    # The kernel released the killed holder's lock: no stale lock file blocks the next start.
    with DataDir(tmp_path).locked() as data:
        assert (tmp_path / "codemojex.pid").read_text().strip().isdigit()
        assert data.database_url.endswith("codemojex.db")


def test_lock_is_released_on_exit(tmp_path: Path) -> None:
    with DataDir(tmp_path).locked():
        pass
    with DataDir(tmp_path).locked():
        pass


def test_the_dashboard_token_is_kept_across_runs_and_private(tmp_path: Path) -> None:
    first = DataDir(tmp_path).dashboard_token()
    assert len(first) >= 16
    assert DataDir(tmp_path).dashboard_token() == first  # the next run: the same token
    assert (tmp_path / "dashboard.token").stat().st_mode & 0o777 == 0o600
    (tmp_path / "dashboard.token").write_text("not a token!\n")
    assert DataDir(tmp_path).dashboard_token() != first  # a damaged file: a fresh token

"""The capacity probe measures the live server and sizes a pool from what it found."""

from __future__ import annotations

import math
import subprocess
import sys

from echomq.ops.capacity import Capacity, measure, report
from echomq.wire.connector import Connector
from echomq.wire.url import ConnectionOptions


async def test_capacity_probe_measures_and_cleans_up(valkey_url: str, queue_name: str) -> None:
    options = ConnectionOptions.from_url(valkey_url)
    found = await measure(options, queue_name, target=5000, handler=0.01, concurrency=10, jobs=800)
    assert 0 < found.round_trip < 1
    assert 0 < found.engine < found.round_trip
    assert found.per_connector > 1 / found.round_trip  # pipelining beats one call at a time
    assert found.pool_width == math.ceil(5000 / found.per_connector)
    assert found.consumers == math.ceil(5000 * (found.round_trip + 0.01) / 10)
    async with Connector(options) as admin:
        assert await admin.call("KEYS", f"emq:{{{queue_name}.capacity-probe}}:*") == []


def test_capacity_report_warns_past_the_engine_ceiling() -> None:
    over = Capacity(0.001, 0.00005, 8000, target=50_000, handler=0, concurrency=10)
    assert over.engine_ceiling == 10_000
    assert dict(report(over))["warning"].startswith("the target exceeds")
    under = Capacity(0.001, 0.00005, 8000, target=5_000, handler=0, concurrency=10)
    assert "warning" not in dict(report(under))


def test_capacity_command_refuses_a_bad_queue_name() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "echomq.cli", "capacity", "--queue", "no spaces"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "invalid queue name 'no spaces'" in done.stderr

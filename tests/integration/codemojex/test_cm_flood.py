"""``codemojex flood --small`` through the command, on the suite's Valkey: the report shows no
429, the quiet rooms' p99 below the loud room's, a PNG, and counts that add up (every guess
scored, every notification delivered, dropped or still waiting — none lost). The figures
themselves are reported, not asserted. And a run takes its keys away with it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from codemojex.cli import main
from codemojex.flood import SMALL, run_flood
from echomq import ConnectionOptions
from echomq.wire import Pool

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_small_flood_has_no_429_and_quiet_rooms_beat_the_loud_one(
    valkey_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ECHOMQ_URL", valkey_url)
    png = tmp_path / "flood.png"

    code = main(["flood", "--small", "--json", "--out", str(png)])

    report = json.loads(capsys.readouterr().out)
    print(json.dumps(report, indent=1, ensure_ascii=False))
    notifications = report["notifications"]
    assert notifications["too_many_requests"] == 0
    assert report["quiet_p99"] < report["loud_p99"]
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    assert report["png"] == str(png)
    assert report["unscored"] == 0
    assert report["scored"] == report["submitted"] > 0
    assert report["games_closed"] == 1 + report["options"]["quiet_rooms"]
    kinds = ("delivered", "dropped", "dead", "pending", "coalesced")
    settled = sum(notifications[k] for k in kinds)
    assert settled == report["expected_notifications"] > 0
    assert report["lost"] == 0
    assert code == 0


async def test_a_flood_leaves_no_key_of_its_own_behind(valkey_url: str, queue_name: str) -> None:
    tiny = dataclasses.replace(SMALL, players=2, guesses=5, watchers=2, duration=3.0)
    prefix = f"{queue_name}."

    trace = await run_flood(tiny, valkey_url, prefix=prefix)

    assert trace.unscored == 0
    pool = await Pool(ConnectionOptions.from_url(valkey_url), 1).connect()
    try:
        left = [
            key
            for pattern in (f"*{prefix}*", f"*{{{prefix}cm.notify}}*")
            for key in await pool.call("KEYS", pattern)
        ]
    finally:
        await pool.close()
    assert left == []

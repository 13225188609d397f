"""Two checkouts of echomq side by side: ``bench/targets.py`` alternately for each, on one
server, and the medians with their ratio.

Run: ``git worktree add /tmp/old <commit>`` then
``.venv/bin/python bench/versus.py --old /tmp/old/src [--runs 5]``. The new side is this
checkout's ``src``. Runs alternate old, new, old, new … so the machine's noise hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from echomq.server import EmbeddedValkey

BENCH = Path(__file__).resolve().parent
LABELS = {
    "single": "single enqueue, one producer awaiting each call (jobs/s)",
    "bulk": "bulk enqueue, enqueue_many of 1,000 (jobs/s)",
    "drain_default": "drain, one `echomq worker`, concurrency 10, default options (jobs/s)",
    "drain_batch50": "drain, same worker with `--batch 50` (jobs/s)",
    "drain_single": "drain, same worker with `--batch 1` (jobs/s)",
    "p50_ms": "enqueue → start p50 at 200 jobs/s (ms)",
    "p99_ms": "enqueue → start p99 at 200 jobs/s (ms)",
}


def _once(src: str, url: str, extra: list[str]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": src}
    command = [sys.executable, str(BENCH / "targets.py"), "--url", url, *extra]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old", required=True, help="the other checkout's src folder")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20_000)
    args = parser.parse_args()
    new_src = str(BENCH.parent / "src")
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    with EmbeddedValkey() as server:
        print(f"embedded valkey {server.version}; {args.runs} runs each, alternated")
        for r in range(args.runs):
            for db, (side, src) in enumerate((("old", args.old), ("new", new_src)), start=1):
                # A database each: checkouts of two wire versions fence each other out of one.
                url = f"{server.url.removesuffix('/0')}/{db}"
                runs[side].append(_once(src, url, ["--jobs", str(args.jobs)]))
                print(f"run {r + 1} {side}: {json.dumps(runs[side][-1])}", file=sys.stderr)
    print("\n| workload | previous design | batch-native | ratio |\n|---|---:|---:|---:|")
    for key, label in LABELS.items():
        old = statistics.median(run[key] for run in runs["old"])
        new = statistics.median(run[key] for run in runs["new"])
        figure = ",.0f" if old > 100 else ".2f"
        print(f"| {label} | {old:{figure}} | {new:{figure}} | {new / old:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``codemojex flood``: the seeds' scenario, reproducible — one room floods, quiet rooms keep
playing, finished games fan out a burst of result notifications — run in-process against the real
engine, then measured (latency per room, Jain's fairness, send rate), reported and plotted.

The runner (the engine, the sandbox, aiogram: seconds to import) loads on first use of its
names, so ``codemojex --help``, which declares this command's arguments, does not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from codemojex.flood.measure import (
    Fairness,
    GuessSample,
    RoomLatency,
    SendRate,
    fairness,
    jain,
    percentile,
    room_latencies,
    send_rate,
)
from codemojex.flood.scenario import SMALL, FloodOptions, Plan, PlayerPlan, RoomPlan, plan

if TYPE_CHECKING:
    from codemojex.flood.run import Progress, Trace, run_flood
    from codemojex.flood.sending import SendCounts

_LAZY = {
    "Progress": "codemojex.flood.run",
    "SendCounts": "codemojex.flood.sending",
    "Trace": "codemojex.flood.run",
    "run_flood": "codemojex.flood.run",
}

__all__ = [
    "SMALL",
    "Fairness",
    "FloodOptions",
    "GuessSample",
    "Plan",
    "PlayerPlan",
    "Progress",
    "RoomLatency",
    "RoomPlan",
    "SendCounts",
    "SendRate",
    "Trace",
    "fairness",
    "jain",
    "percentile",
    "plan",
    "room_latencies",
    "run_flood",
    "send_rate",
]


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)

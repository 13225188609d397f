"""``codemojex flood``: the seeds' scenario, reproducible — one room floods, quiet rooms keep
playing, finished games fan out a burst of result notifications — run in-process against the real
engine, then measured (latency per room, Jain's fairness, send rate), reported and plotted.
"""

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
from codemojex.flood.run import Progress, Trace, run_flood
from codemojex.flood.scenario import SMALL, FloodOptions, Plan, PlayerPlan, RoomPlan, plan
from codemojex.flood.sending import SendCounts

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

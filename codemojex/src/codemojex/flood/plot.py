"""The flood's picture: one PNG with two panels on a shared time axis — each guess's latency
(submit → scored) per room at the time it was submitted, and the notifications delivered per
second against Telegram's 30/s line. Drawn with matplotlib's Agg canvas: no display needed.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from matplotlib.figure import Figure

from codemojex.flood.measure import TELEGRAM_BUDGET, send_rate
from codemojex.flood.run import Trace


def plot(trace: Trace, path: str | Path) -> Path:
    """Draw ``trace`` into a PNG at ``path`` (parent directories are created); returns it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    figure = Figure(figsize=(10, 7), layout="constrained")
    latency, sends = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))

    by_room: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for sample in trace.samples:
        if sample.latency is not None:
            by_room[sample.room][0].append(sample.submitted)
            by_room[sample.room][1].append(sample.latency * 1000)
    loud = trace.plan.loud.label
    for room in sorted(by_room, key=lambda room: (room != loud, room)):
        at, ms = by_room[room]
        is_loud = room == loud
        latency.scatter(
            at, ms, s=6 if is_loud else 18, alpha=0.35 if is_loud else 0.9,
            marker="." if is_loud else "o", label=f"{room} ({len(at)})",
            color="tab:red" if is_loud else None, zorder=1 if is_loud else 2,
        )  # fmt: skip
    start, end = trace.flood
    for axes in (latency, sends):
        axes.axvspan(start, end, color="tab:red", alpha=0.06, lw=0)
    latency.set_yscale("log")
    latency.set_ylabel("guess latency, submit → scored (ms)")
    latency.set_title(
        f"codemojex flood, seed {trace.plan.options.seed}: latency per room "
        "(shaded: the loud room's flood)"
    )
    latency.legend(loc="upper left", fontsize="small", markerscale=2)
    latency.grid(True, which="both", alpha=0.3)

    rate = send_rate(trace.sends)
    if rate.per_bin:
        first = min(trace.sends) // rate.bin * rate.bin
        lefts = [first + n * rate.bin for n in range(len(rate.per_bin))]
        heights = [n / rate.bin for n in rate.per_bin]
        sends.bar(lefts, heights, width=rate.bin, align="edge", color="tab:blue", alpha=0.7,
                  label="notifications delivered per second")  # fmt: skip
    sends.axhline(TELEGRAM_BUDGET, color="black", ls="--", lw=1, label="Telegram's 30/s")
    sends.set_ylim(0, max(TELEGRAM_BUDGET, rate.peak) * 1.25)
    sends.set_xlabel("seconds since the start")
    sends.set_ylabel("sends per second")
    sends.legend(loc="upper left", fontsize="small")
    sends.grid(True, alpha=0.3)
    figure.savefig(target, dpi=110)
    return target

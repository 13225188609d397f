"""The flood's report: the figures of a trace gathered in one value (:func:`summarise`), shown as
rich tables or as JSON, and the live progress display while the flood runs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from codemojex.flood.measure import (
    TELEGRAM_BUDGET,
    Fairness,
    RoomLatency,
    SendRate,
    fairness,
    pooled_p99,
    room_latencies,
    send_rate,
)
from codemojex.flood.run import Progress, Trace
from codemojex.flood.scenario import FloodOptions
from codemojex.flood.sending import SendCounts


@dataclass(frozen=True, slots=True)
class FloodReport:
    """Every figure of one run. Latencies are seconds; ``lost`` is the notifications the game
    asked for that were neither delivered, dropped, dead nor still waiting (0 when none is)."""

    options: FloodOptions
    elapsed: float
    flood: tuple[float, float]
    submitted: int
    scored: int
    unscored: int
    refused: int
    games_closed: int
    rooms: tuple[RoomLatency, ...]
    loud_p99: float
    quiet_p99: float
    fairness: Fairness
    send_rate: SendRate
    notifications: SendCounts
    expected_notifications: int
    lost: int

    @property
    def is_sound(self) -> bool:
        """No 429, no guess left unscored, no notification lost."""
        return self.notifications.too_many_requests == 0 and self.unscored == 0 and self.lost == 0

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data (``nan`` becomes ``None``)."""
        body: dict[str, Any] = _clean(dataclasses.asdict(self))
        return body | {"is_sound": self.is_sound}


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 4)
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item) for item in value]
    return value


def summarise(trace: Trace) -> FloodReport:
    """The figures of ``trace``."""
    loud = trace.plan.loud.label
    counts = trace.notifications
    settled = counts.delivered + counts.dropped + counts.dead + counts.pending + counts.coalesced
    return FloodReport(
        options=trace.plan.options,
        elapsed=trace.elapsed,
        flood=trace.flood,
        submitted=len(trace.samples),
        scored=len(trace.samples) - trace.unscored,
        unscored=trace.unscored,
        refused=trace.refused,
        games_closed=trace.closed,
        rooms=room_latencies(trace.samples, loud),
        loud_p99=pooled_p99(trace.samples, [loud]),
        quiet_p99=pooled_p99(trace.samples, [room.label for room in trace.plan.quiet]),
        fairness=fairness(trace.samples, trace.plan.options.window),
        send_rate=send_rate(trace.sends),
        notifications=counts,
        expected_notifications=trace.expected_notifications,
        lost=trace.expected_notifications - settled,
    )


def _ms(seconds: float) -> str:
    return "–" if math.isnan(seconds) else f"{seconds * 1000:,.0f} ms"


def render(report: FloodReport, console: Console) -> None:
    """Print ``report`` as rich tables."""
    options = report.options
    console.print(
        f"[bold]codemojex flood[/] seed {options.seed}: {options.players} players × "
        f"{options.guesses} guesses in the loud room, {options.quiet_rooms} quiet rooms × "
        f"{options.quiet_players} players; {report.elapsed:.1f} s"
    )
    rooms = Table(title="Guess latency, submit → scored", title_justify="left")
    for column in ("room", "guesses", "p50", "p99", "max", "charge p99", "queue p99"):
        rooms.add_column(column, justify="left" if column == "room" else "right")
    for room in report.rooms:
        rooms.add_row(
            f"[red]{room.room}[/]" if room.is_loud else room.room,
            str(room.guesses),
            *(_ms(v) for v in (room.p50, room.p99, room.max, room.charge_p99, room.queue_p99)),
        )
    console.print(rooms)
    counts = report.notifications
    rate = report.send_rate
    figures = Table(title="Figures", title_justify="left", show_header=False)
    figures.add_column(justify="left")
    figures.add_column(justify="right")
    for name, value in (
        ("p99 loud room / quiet rooms", f"{_ms(report.loud_p99)} / {_ms(report.quiet_p99)}"),
        ("guesses submitted / scored / refused",
         f"{report.submitted} / {report.scored} / {report.refused}"),
        ("Jain's index (mean / lowest)",
         f"{report.fairness.mean:.3f} / {report.fairness.lowest:.3f} "
         f"over {report.fairness.windows} × {report.fairness.window:g} s"),
        ("sends per second (peak / mean)",
         f"{rate.peak:.0f} / {rate.mean:.1f} (budget {TELEGRAM_BUDGET:.0f}/s)"),
        ("429s seen", f"[{'green' if counts.too_many_requests == 0 else 'red'}]"
         f"{counts.too_many_requests}[/]"),
        ("notifications asked / delivered / coalesced", f"{report.expected_notifications} / "
         f"{counts.delivered} / {counts.coalesced}"),
        ("deferred (times) / retried / dropped / dead",
         f"{counts.deferred} / {counts.retried} / {counts.dropped} / {counts.dead}"),
        ("still waiting (deferred) / lost", f"{counts.pending} / {report.lost}"),
    ):  # fmt: skip
        figures.add_row(name, value)
    console.print(figures)
    if counts.pending:
        console.print(waiting_note(counts.pending))


def waiting_note(pending: int) -> str:
    """Why notifications are still queued when the run ends: nothing is lost, they wait for
    the budgets Telegram sets (the flood sends faster than a chat or a group may receive)."""
    return (
        f"{pending} notifications still wait on cm.notify: deferred, not lost. Telegram lets a "
        "bot send about 1 message a second to one chat and 20 a minute to one group, so a "
        "loud room's backlog drains over the following minutes (each player's own score at "
        "1/s; the group's live status coalesces into one edit per budget slot)."
    )


class LiveProgress:
    """``with LiveProgress(console) as live: await run_flood(..., progress=live.update)``."""

    def __init__(self, console: Console) -> None:
        self.live = Live(Table(), console=console, refresh_per_second=4, transient=True)

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def update(self, progress: Progress) -> None:
        rooms = Table(title=f"flood {progress.elapsed:5.1f} s · {progress.phase}")
        for column in ("room", "submitted", "scored"):
            rooms.add_column(column, justify="left" if column == "room" else "right")
        for label, submitted, scored in progress.rooms:
            rooms.add_row(label, str(submitted), str(scored))
        sends = progress.sends
        line = (
            f"p99 loud {_ms(progress.loud_p99)} · quiet {_ms(progress.quiet_p99)} · "
            f"sent {sends.delivered} · coalesced {sends.coalesced} · deferred {sends.deferred} · "
            f"waiting {sends.pending} · "
            f"429s {sends.too_many_requests}"
        )
        self.live.update(Group(rooms, line))

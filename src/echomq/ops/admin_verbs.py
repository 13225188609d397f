"""The ``echomq`` verbs that read and steer a live queue: stats, lanes, ring, dead, job, pause,
resume, cool, uncool, weight, limit, fairness, reprocess, remove, cancel, drain (and, in
``echomq.ops.shard_verbs``, shards). Tables for people (rich), ``--json`` for scripts. A
sharded queue is opened as one (``open_queue``): every verb reads or writes all its shards,
and ``stats`` shows each shard besides the sums.

Exit codes: 0 done, 1 refused by the engine or nothing to act on (unknown queue or job),
2 bad input (argparse's own convention).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from echomq.engine.checks import count
from echomq.engine.opening import connect_queue
from echomq.engine.queue import Queue
from echomq.engine.snapshot import eta_json, queue_exists, read_snapshot
from echomq.wire.url import redact_url


class NotFound(Exception):
    """An unknown queue or job: exit 1 with the message."""


Verb = Callable[[Queue, argparse.Namespace], Coroutine[Any, Any, Any]]


def setting(value: str) -> int | None:
    """A ``weight``/``limit`` argument: an integer >= 1, or ``none`` to remove the setting."""
    if value.lower() == "none":
        return None
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer >= 1 or 'none', got {value!r}"
        ) from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1 or 'none', got {number}")
    return number


def add_verbs(commands: Any) -> None:
    """Register the verbs on the ``echomq`` subparsers."""
    for name, text in (
        ("stats", "jobs per state, the terminal counters, pause and rate-limit state"),
        ("lanes", "every lane: depth, in flight, ceiling, weight, rate, paused, cooling"),
        ("ring", "the serviceable lanes in the order they will be served"),
    ):
        commands.add_parser(name, help=text).add_argument("queue")
    dead = commands.add_parser("dead", help="dead-lettered jobs with their last error")
    dead.add_argument("queue")
    dead.add_argument("--limit", type=int, default=100, help="at most this many (oldest first)")
    job = commands.add_parser("job", help="one job: state, progress and its last log lines")
    job.add_argument("queue")
    job.add_argument("job")
    job.add_argument("--lines", type=int, default=10, help="log lines to show (newest)")
    for name, text in (("pause", "stop serving"), ("resume", "serve again")):
        verb = commands.add_parser(name, help=f"{text} a lane, or the whole queue")
        verb.add_argument("queue")
        verb.add_argument("group", nargs="?", help="the lane (omit: the whole queue)")
    cool = commands.add_parser("cool", help="take a lane off the ring for some seconds")
    cool.add_argument("queue")
    cool.add_argument("group")
    cool.add_argument("seconds", type=float, help="how long (a cool in force is never shortened)")
    uncool = commands.add_parser("uncool", help="end a lane's cool now")
    uncool.add_argument("queue")
    uncool.add_argument("group")
    for name, text in (
        ("weight", "claims per ring visit (none = 1)"),
        ("limit", "jobs leased at once (none = no ceiling)"),
    ):
        verb = commands.add_parser(name, help=f"set a lane's {text}")
        verb.add_argument("queue")
        verb.add_argument("group")
        verb.add_argument("value", type=setting, help="an integer >= 1, or none")
    fairness = commands.add_parser(
        "fairness", help="measure a lane's turn in claims, units (cost) or run time (time)"
    )
    fairness.add_argument("queue")
    fairness.add_argument("by", choices=("count", "cost", "time"))
    fairness.add_argument(
        "--quantum", type=float, help="a visit's grant per unit of weight: units, or seconds"
    )
    for name, text in (
        ("reprocess", "return a dead job to its lane with a fresh failure budget"),
        ("remove", "delete a job that is not leased"),
    ):
        verb = commands.add_parser(name, help=text)
        verb.add_argument("queue")
        verb.add_argument("job")
    cancel = commands.add_parser(
        "cancel", help="cancel a job: pending or scheduled now, running within a beat"
    )
    cancel.add_argument("queue")
    cancel.add_argument("job")
    cancel.add_argument("--reason", default="", help="kept on the row (at most 256 bytes)")
    cancel.add_argument(
        "--keep", type=float, default=86_400.0, help="seconds the cancelled row is kept (0: none)"
    )
    drain = commands.add_parser("drain", help="delete every pending job (asks first)")
    drain.add_argument("queue")
    drain.add_argument("--schedule", action="store_true", help="scheduled jobs too")
    drain.add_argument("--yes", action="store_true", help="do not ask")


# -- the verbs (each answers JSON-able data) ----------------------------------------------------


async def _stats(queue: Queue, args: argparse.Namespace) -> Any:
    # The snapshot holds the lane policies: read once (on a sharded queue, once per shard).
    snap, fairness = await asyncio.gather(read_snapshot(queue, dead=0), queue.fairness_in_force())
    policies = snap.policies
    assert policies is not None  # read_snapshot reads them
    data = snap.as_json()
    return {**data["counts"], "paused": snap.paused, "concurrency": snap.concurrency,
            "limiter": data["limiter"], "fairness": dataclasses.asdict(fairness),
            "lane_default": json.loads(policies.default.to_json()),
            **({"shards": data["shards"]} if snap.shards else {})}  # fmt: skip


async def _lanes(queue: Queue, args: argparse.Namespace) -> Any:
    """Each lane's settings in force; ``policy``: ``named`` when a lane policy names it, else
    ``default`` (its own settings, if any, else the default policy's); ``eta``: where a job
    enqueued on a lane with work now would stand (``queue.etas()``), None for an empty lane."""
    lanes, policies, etas = await asyncio.gather(queue.lanes(), queue.policies(), queue.etas())
    rows = []
    for lane in lanes:
        row = dataclasses.asdict(lane)
        row = {"group": row.pop("lane"), **row}  # the JSON's field name, as the dashboard's
        row["policy"] = "named" if lane.lane in policies.lanes else "default"
        row["eta"] = eta_json(etas.get(lane.lane))
        rows.append(row)
    return rows


async def _ring(queue: Queue, args: argparse.Namespace) -> Any:
    return await queue.ring()


async def _dead(queue: Queue, args: argparse.Namespace) -> Any:
    jobs = await queue.dead(count(args.limit, "limit"))
    return [
        {"id": j.id, "group": j.lane, "attempts": j.attempts, "last_error": j.last_error}
        for j in jobs
    ]


async def _job(queue: Queue, args: argparse.Namespace) -> Any:
    info = await queue.job(args.job)
    if info is None:
        raise NotFound(f"no job {args.job} in queue {queue.name}")
    shown: dict[str, Any] = {
        "id": info.id,
        "state": info.state,
        "attempts": info.attempts,
        "group": info.lane,
        "progress": info.progress,
        "last_error": info.last_error,
    }
    if info.cancel is not None:
        shown["cancel"] = info.cancel  # the reason of a cancel (asked, or done)
    shown["log"] = await queue.logs(info.id, count(args.lines, "lines"))
    return shown


async def _pause(queue: Queue, args: argparse.Namespace) -> Any:
    wanted = args.command == "pause"
    if args.group is None:
        was = await queue.is_paused()
        await (queue.pause() if wanted else queue.resume())
        return {"queue": queue.name, "lane": None, "paused": wanted, "changed": was != wanted}
    lane = queue.lane(args.group)
    changed = await (lane.pause() if wanted else lane.resume())
    return {"queue": queue.name, "lane": lane.lane, "paused": wanted, "changed": changed}


async def _cool(queue: Queue, args: argparse.Namespace) -> Any:
    lane = queue.lane(args.group)
    if args.command == "uncool":
        return {"queue": queue.name, "lane": lane.lane, "changed": await lane.uncool()}
    changed = await lane.cool(args.seconds)
    info = await lane.info()
    return {"queue": queue.name, "lane": lane.lane, "changed": changed,
            "cooling": info.cooling, "cooling_until": info.cooling_until}  # fmt: skip


async def _setting(queue: Queue, args: argparse.Namespace) -> Any:
    lane = queue.lane(args.group)
    await (lane.weight(args.value) if args.command == "weight" else lane.limit(args.value))
    return {"queue": queue.name, "lane": lane.lane, args.command: args.value}


async def _fairness(queue: Queue, args: argparse.Namespace) -> Any:
    quantum = args.quantum
    if args.by == "cost" and quantum is not None and quantum == int(quantum):
        quantum = int(quantum)  # whole units (a fraction is refused by name)
    changed = await queue.fairness(args.by, quantum=quantum)
    return {"queue": queue.name, "fairness": args.by, "quantum": quantum, "changed": changed}


async def _reprocess(queue: Queue, args: argparse.Namespace) -> Any:
    if not await queue.reprocess(args.job):
        raise NotFound(f"no job {args.job} in queue {queue.name}")
    return {"queue": queue.name, "reprocessed": args.job}


async def _remove(queue: Queue, args: argparse.Namespace) -> Any:
    if not await queue.remove(args.job):
        raise NotFound(f"no job {args.job} in queue {queue.name}")
    return {"queue": queue.name, "removed": args.job}


async def _cancel(queue: Queue, args: argparse.Namespace) -> Any:
    answer = await queue.cancel(args.job, args.reason)
    if answer.outcome == "absent":
        raise NotFound(f"no job {args.job} in queue {queue.name}")
    return {"queue": queue.name, "job": answer.id, "was": answer.was, "outcome": answer.outcome}


async def _drain(queue: Queue, args: argparse.Namespace) -> Any:
    counts = await queue.counts()
    doomed = counts.pending + counts.waiting + (counts.scheduled if args.schedule else 0)
    if not args.yes:
        what = "pending and scheduled" if args.schedule else "pending"
        # On stderr: stdout carries the answer only, so ``--json`` output stays parseable.
        question = f"Delete {doomed} {what} jobs of {queue.name}? [y/N] "
        print(question, end="", flush=True, file=sys.stderr)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            return {"queue": queue.name, "drained": 0, "confirmed": False}
    deleted = await queue.drain(schedule=args.schedule)
    return {"queue": queue.name, "drained": deleted, "confirmed": True}


VERBS: dict[str, Verb] = {
    "stats": _stats,
    "lanes": _lanes,
    "ring": _ring,
    "dead": _dead,
    "job": _job,
    "pause": _pause,
    "resume": _pause,
    "cool": _cool,
    "uncool": _cool,
    "weight": _setting,
    "limit": _setting,
    "fairness": _fairness,
    "reprocess": _reprocess,
    "remove": _remove,
    "cancel": _cancel,
    "drain": _drain,
}


async def run(url: str, args: argparse.Namespace, *, verb: Verb | None = None) -> Any:
    """Connect, refuse an unknown queue, run the verb (``verb``, else the one ``args.command``
    names), close."""
    # A cancel keeps the cancelled row (``--keep``) as an app's queue keeps results.
    keep = getattr(args, "keep", 0.0)
    queue = await connect_queue(url, args.queue, pool_size=1, events=False, result_ttl=keep)
    try:
        if not await queue_exists(queue):
            # Name the server: the usual cause is the right name on the wrong server.
            raise NotFound(
                f"no queue named {args.queue} on {redact_url(url)} (never used there, or "
                "deleted; --url or ECHOMQ_URL names the server)"
            )
        return await (verb or VERBS[args.command])(queue, args)
    finally:
        await queue.close()


# -- output -------------------------------------------------------------------------------------


def show(command: str, data: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(data, indent=2))
        return
    if command in ("lanes", "dead"):
        if not data:
            print(f"(no {'lanes' if command == 'lanes' else 'dead jobs'})")
            return
        if command == "lanes":  # one rate column: "5/1.0s smooth"
            data = [_lane_row(lane) for lane in data]
        table(
            list(data[0].keys()),
            [["" if v is None else shown_cell(str(v)) for v in r.values()] for r in data],
        )
    elif command == "stats":
        shards = data.get("shards", [])
        rows = [
            [k, json.dumps(v) if isinstance(v, dict) else str(v)]
            for k, v in data.items()
            if k != "shards"
        ]
        table(["state", "value"], rows)
        if shards:
            table(list(_SHARD_COLUMNS), [_shard_row(shard) for shard in shards])
    elif command == "job":
        for key, value in data.items():
            if key == "group":
                print(f"group: {shown_cell(value)}")
            elif key != "log" and value is not None:
                print(f"{key}: {json.dumps(value) if key == 'progress' else value}")
        print("log:" if data["log"] else "log: (none)")
        for line in data["log"]:
            print(f"  {line}")
    elif command == "ring":
        print(" -> ".join(map(shown_cell, data)) if data else "(the ring is empty)")
    else:
        fields = {k: shown_cell(v) if isinstance(v, str) else v for k, v in data.items()}
        print(", ".join(f"{k}: {v}" for k, v in fields.items() if v is not None))


#: ``stats``' table of shards: its heading -> the field of ``ShardStats`` it shows.
_SHARD_COLUMNS = {
    "shard": "shard",
    "tag": "tag",
    "primary": "primary",
    "lanes": "lanes",
    "pending": "pending",
    "leased": "leased",
    "scheduled": "scheduled",
    "dead": "dead",
    "W_s": "weight",
    "band": "band",
    "claims/s": "claims_per_second",
    "quota": "quota",
    "paused": "paused",
}


def quota_cell(shard: dict[str, Any]) -> str:
    """A shard's quotas of the queue-wide gates in one cell: ``c 2, r 5`` (leases at once,
    claims per the budget's window; 0: it holds none now), ``-`` when the queue has no budget."""
    parts = [
        f"{letter} {shard[field]}"
        for letter, field in (("c", "concurrency_quota"), ("r", "rate_quota"))
        if shard[field] is not None
    ]
    return ", ".join(parts) or "-"


def _shard_row(shard: dict[str, Any]) -> list[str]:
    cells = []
    for field in _SHARD_COLUMNS.values():
        if field == "quota":
            cells.append(quota_cell(shard))
            continue
        value = shard[field]
        if field == "claims_per_second":
            cells.append(f"{value:.1f}")
        else:
            cells.append("-" if value is None else shown_cell(str(value)))
    return cells


def shown_cell(value: str) -> str:
    """A cell as a table shows it: as is when printable, else JSON-quoted, so a lane name with a
    newline or a NUL cannot break the table (``--json`` gives every name exactly)."""
    return value if value.isprintable() else json.dumps(value)


def _lane_row(lane: dict[str, Any]) -> dict[str, Any]:
    hidden = ("rate", "rate_mode", "rate_wait", "cooling", "cooling_until", "eta")
    row = {k: v for k, v in lane.items() if k not in hidden}
    rate = lane["rate"]
    row["rate"] = f"{rate[0]}/{rate[1]:g}s {lane['rate_mode']}" if rate else None
    row["wait"] = lane["rate_wait"]
    row["cooling"] = lane["cooling"]
    eta = lane["eta"]
    if eta is None:
        row["eta"] = None
    elif eta["seconds"] is None:
        row["eta"] = f"- ({eta['bound']})"
    else:
        row["eta"] = f"{eta['seconds']:.2f}s ({eta['bound']})"
    return row


def table(header: list[str], rows: list[list[str]]) -> None:
    """A rich table (the ``echomq[cli]`` extra), or aligned plain columns without it."""
    try:
        from rich.console import Console
        from rich.measure import Measurement
        from rich.table import Table
        from rich.text import Text
    except ImportError:
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        return
    table = Table(*header)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # a cell is text, never rich markup
    console = Console(soft_wrap=False)
    if not console.is_terminal:  # piped: every column whole, however wide
        widest = Measurement.get(console, console.options.update_width(10_000), table).maximum
        console = Console(soft_wrap=False, width=max(console.width, 160, widest))
    console.print(table)

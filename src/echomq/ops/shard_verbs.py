"""``echomq shards``: a sharded queue's directory as an operator reads it (its shard count,
epoch, each shard's tag, primary, lane slots, lanes, active weight W_s and quotas, the
queue-wide budgets, and the lanes a move placed off their slot's shard), and ``echomq shards
QUEUE move LANE K``, which moves a lane (``ShardedQueue.move_lane``; docs/concepts/shards.md,
"Lane placement"), and ``echomq shards QUEUE grow N``, which grows the queue to N shards online
(``ShardedQueue.grow``, "Changing S"). On a queue of one slot all are refused as bad input
(exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
from typing import Any

from echomq.engine.keys import validate_group
from echomq.engine.queue import Queue
from echomq.engine.sharded import ShardedQueue
from echomq.errors import InvalidArgument
from echomq.ops import admin_verbs
from echomq.ops.admin_verbs import quota_cell, shown_cell, table


def add_verb(commands: Any) -> None:
    """Register ``shards`` on the ``echomq`` subparsers."""
    verb = commands.add_parser(
        "shards",
        help="a sharded queue's shards, budgets and placed lanes; 'move LANE K' moves a lane, "
        "'grow N' grows it to N shards online",
    )
    verb.add_argument("queue")
    verb.add_argument(
        "action", nargs="?", choices=("move", "grow"), help="move a lane, or grow the queue"
    )
    verb.add_argument("lane", nargs="?", help="move: the lane; grow: the shard count N")
    verb.add_argument("to", nargs="?", type=int, help="move: the shard it goes to (0 .. count - 1)")


async def run(url: str, args: argparse.Namespace) -> Any:
    """Every argument checked before the queue is opened, then the verb (see ``admin_verbs``)."""
    if args.action is None and (args.lane is not None or args.to is not None):
        raise InvalidArgument("action", args.lane, "say 'move' before the lane and the shard")
    if args.action == "move" and (args.lane is None or args.to is None):
        raise InvalidArgument("move", args.lane, "needs a lane and the shard it goes to")
    if args.action == "grow":
        if args.to is not None or args.lane is None or not args.lane.isdigit():
            raise InvalidArgument("grow", args.lane, "needs one number: the shard count N")
        args.count = int(args.lane)
    return await admin_verbs.run(url, args, verb=_shards)


async def _shards(queue: Queue, args: argparse.Namespace) -> Any:
    if not isinstance(queue, ShardedQueue):
        raise InvalidArgument(
            "queue",
            queue.name,
            "not a sharded queue: it lives on one slot, with no shards to show or move a lane to",
        )
    if args.action == "move":
        return await _move(queue, args.lane, args.to)
    if args.action == "grow":
        before = len(queue.shards)
        grown = await queue.grow(args.count)
        return {"queue": queue.name, "grown": grown, "from": before, "to": args.count}
    return await _directory(queue)


async def _directory(queue: ShardedQueue) -> dict[str, Any]:
    placement = queue.placement_map
    stats, budgets = await asyncio.gather(queue.shard_stats(), queue.rebalancer.budgets())
    rate = budgets.rate
    return {
        "queue": queue.name,
        "count": placement.shards,
        "epoch": placement.epoch,
        "budgets": {
            "concurrency": budgets.concurrency,
            "rate": None
            if rate is None
            else {"max": rate[0], "window": rate[1] / 1000, "mode": rate[2] or "fixed"},
        },
        "shards": [
            {
                **dataclasses.asdict(shard),
                "slots": sum(len(run) for run in placement.slots_of(shard.shard)),
            }
            for shard in stats
        ],
        "placed": dict(placement.overrides),
    }


async def _move(queue: ShardedQueue, lane: str, to: int) -> dict[str, Any]:
    source = queue.placement_map.shard_of(validate_group(lane))
    moved = await queue.move_lane(lane, to=to)
    info = await queue.lane(lane).info()
    return {
        "queue": queue.name,
        "lane": lane,
        "from": source,
        "to": to,
        "moved": moved,
        "epoch": queue.placement_map.epoch,
        "pending": info.depth,
        "scheduled": info.scheduled,
        "leased": info.active,
    }


def show(data: dict[str, Any]) -> None:
    """The directory as tables, or a move or a grow as one line."""
    if "grown" in data:
        name = shown_cell(data["queue"])
        if not data["grown"]:
            print(f"{name} has {data['to']} shards already: nothing grown")
        else:
            print(f"{name} grew from {data['from']} to {data['to']} shards")
        return
    if "moved" in data:
        lane = shown_cell(data["lane"])
        if not data["moved"]:
            print(f"lane {lane} is on shard {data['to']} already: nothing moved")
            return
        print(
            f"moved lane {lane} from shard {data['from']} to shard {data['to']} "
            f"(epoch {data['epoch']}): {data['pending']} pending, {data['scheduled']} "
            f"scheduled, {data['leased']} leased there now"
        )
        return
    budgets = data["budgets"]
    rate = budgets["rate"]
    gates = [
        f"concurrency {budgets['concurrency']}" if budgets["concurrency"] is not None else "",
        f"rate {rate['max']}/{rate['window']:g}s {rate['mode']}" if rate else "",
    ]
    print(
        f"{shown_cell(data['queue'])}: {data['count']} shards, epoch {data['epoch']}; "
        f"budgets: {', '.join(g for g in gates if g) or 'none'}"
    )
    table(
        ["shard", "tag", "primary", "slots", "lanes", "pending", "leased", "W_s", "quota"],
        [
            [
                str(s["shard"]),
                shown_cell(s["tag"]),
                s["primary"],
                str(s["slots"]),
                str(s["lanes"]),
                str(s["pending"]),
                str(s["leased"]),
                str(s["weight"]),
                quota_cell(s),
            ]
            for s in data["shards"]
        ],
    )
    placed = data["placed"]
    if not placed:
        print("placed: none (every lane on its slot's shard)")
        return
    table(["placed lane", "shard"], [[shown_cell(lane), str(k)] for lane, k in placed.items()])

"""The rate layer: before each send one atomic take of the engine's token buckets pays every
budget the send spends (global, the chat's, a group's); over budget the notification is deferred,
never dropped. A chat that outran its own budget gets a lane rate of the same pace, so the engine
claims only what the budget can send.
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from dataclasses import dataclass

from echomq import Queue
from echomq.engine import Bucket, Buckets, Taken


@dataclass(frozen=True, slots=True)
class NotifyLimits:
    """The send budgets (tokens per second, burst), a little under Telegram's: about 30/s
    overall, about 1/s per chat with short bursts, and at most 20 per minute per group."""

    global_rate: float = 30.0
    global_burst: int = 30
    chat_rate: float = 1.0
    chat_burst: int = 3
    group_rate: float = 20 / 60
    group_burst: int = 20

    def buckets(self, chat: int) -> list[Bucket]:
        """The buckets one send to ``chat`` pays (groups, with negative ids, pay three)."""
        paid = [
            Bucket("global", self.global_rate, self.global_burst),
            Bucket(f"chat:{chat}", self.chat_rate, self.chat_burst),
        ]
        if chat < 0:
            paid.append(Bucket(f"group:{chat}", self.group_rate, self.group_burst))
        return paid

    def own_budget_spent(self, wait: float) -> bool:
        """Whether a refused take's ``wait`` (seconds) comes from the chat's or group's own
        bucket: a take waits for the slowest bucket, and the global bucket never asks more than
        one token's refill (ceil(1000 / global_rate) ms, the take script's rounding), so a
        longer wait is the chat's or group's."""
        return round(wait * 1000) > math.ceil(1000 / self.global_rate)


class RecentChats:
    """A bounded set of chat ids, the least recently added forgotten first: the chats the
    worker has paced (forgetting one costs one idempotent lane-rate write when it is back)."""

    def __init__(self, size: int = 4096) -> None:
        if size < 1:
            raise ValueError(f"size {size!r}: at least 1")
        self.size = size
        self._chats: OrderedDict[int, None] = OrderedDict()

    def add(self, chat: int) -> bool:
        """Remember ``chat``; True when it was not remembered already."""
        if chat in self._chats:
            self._chats.move_to_end(chat)
            return False
        self._chats[chat] = None
        if len(self._chats) > self.size:
            self._chats.popitem(last=False)
        return True

    def __contains__(self, chat: object) -> bool:
        return chat in self._chats

    def __len__(self) -> int:
        return len(self._chats)


class Rate:
    """The budgets of one notify ``queue`` (its buckets live under the queue's hash tag)."""

    def __init__(self, queue: Queue, limits: NotifyLimits, hold: float) -> None:
        self.queue = queue
        self.limits = limits
        self.hold = hold
        self.buckets = Buckets(queue.wire, queue.name)
        self._paced = RecentChats()

    async def take(self, chat: int) -> float | None:
        """Pay every budget of a send to ``chat`` in one take; None when paid, else the wait
        after which to try again. Short waits (within ``hold`` in total) are waited in hand."""
        buckets = self.limits.buckets(chat)
        held = 0.0
        while True:
            taken = await self.buckets.take(buckets)
            if isinstance(taken, Taken):
                return None
            if held + taken.wait > self.hold:
                return taken.wait
            held += taken.wait
            await asyncio.sleep(taken.wait)

    async def pace(self, chat: int) -> None:
        """Give a chat that outran its budget a lane rate of the same pace (once per process
        while the chat is among the last few thousand paced: :class:`RecentChats`).

        Without it a deep lane (one chat × 500) is claimed head after head, each deferred for
        the same second: the whole backlog cycles through the schedule every second. With it
        the engine benches the lane between windows and claims only what the budget can send;
        the buckets still decide every send. The lane rate stays once set (the chat's pace
        never changes, and an empty lane costs nothing), so no one removes it.
        """
        if not self._paced.add(chat):
            return
        # The chat's pace, groups included: pacing a group at 20/min would hold back the
        # bursts its group bucket still allows; a group that spent that bucket is deferred by
        # it, at most a window's claims at a time.
        limits = self.limits
        await self.queue.lane(str(chat)).rate(
            limits.chat_burst, limits.chat_burst / limits.chat_rate
        )

    async def pay(self, chat: int) -> float | None:
        """Pay one send to ``chat``: None when paid, else the seconds to defer it by. A chat
        refused by its own (or its group's) budget is paced; a wait the global bucket caused
        says nothing of this chat's pace."""
        wait = await self.take(chat)
        if wait is not None and self.limits.own_budget_spent(wait):
            await self.pace(chat)
        return wait

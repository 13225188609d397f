"""Pacing: a chat that outran its own budget gets a lane rate of the same pace; a wait the
global bucket caused paces no one (it says nothing of any chat's pace)."""

from __future__ import annotations

from aiogram import Bot
from notify_rig import rig, running

from codemojex.notify.policy import NotifyOptions
from codemojex.notify.rate import NotifyLimits
from codemojex.telegram.sandbox import Sandbox
from echomq import Queue

CHATS = (1001, 1002, 1003, 1004)


async def test_waits_of_the_global_bucket_pace_no_chat(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    # 4/s overall, one token at a time: the 2nd..4th sends wait up to 250 ms, all of it the
    # global bucket's (each chat sends once, far within its own budget).
    limits = NotifyLimits(global_rate=4.0, global_burst=1, chat_rate=1.0, chat_burst=3)
    under = rig(queue, sandbox_bot, options=NotifyOptions(limits=limits))
    async with running(under.consumer):
        for chat in CHATS:
            await under.notifier.notify(chat, f"hello {chat}")
        for chat in CHATS:
            await sandbox.wait_for_messages(chat, 1, timeout=20.0)
    assert under.worker.counts.deferred >= 1  # the global bucket did refuse
    for chat in CHATS:
        assert (await queue.lane(str(chat)).info()).rate is None


async def test_a_chat_over_its_own_budget_gets_its_pace_as_a_lane_rate(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    limits = NotifyLimits(chat_rate=1.0, chat_burst=1)
    under = rig(queue, sandbox_bot, options=NotifyOptions(limits=limits))
    async with running(under.consumer):
        for n in range(3):
            await under.notifier.notify(CHATS[0], f"note {n}")
        await sandbox.wait_for_messages(CHATS[0], 3, timeout=20.0)
    assert (await queue.lane(str(CHATS[0])).info()).rate == (1, 1.0)

"""A group game's live status through the real notification worker and the sandbox: updates
queued behind the group's budget cost one send, later ones edit that one message."""

from __future__ import annotations

from aiogram import Bot
from notify_rig import rig, running, until

from codemojex.keyspace import NotifyKeys
from codemojex.store.kv import Valkey
from codemojex.telegram.sandbox import LOUNGE, Sandbox
from echomq import Queue

GAME = "GAM0000000001x"


async def test_queued_status_updates_are_coalesced_into_one_message_then_edited(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    under = rig(queue, sandbox_bot)
    try:
        for n in range(5):  # queued before the worker runs: a backlog, as behind a budget
            await under.notifier.status(
                LOUNGE, GAME, title="🎯 Live", player=f"PLR{n}", line=f"P{n}: {n}0%", rank=n
            )
        async with running(under.consumer):
            await until(lambda: under.worker.counts.coalesced == 4, 20.0, "4 coalesced")
            (status,) = sandbox.messages(LOUNGE)
            assert status.text.splitlines() == [
                "🎯 Live",
                *(f"P{n}: {n}0%" for n in range(4, -1, -1)),
            ]
            await under.notifier.status(
                LOUNGE, GAME, title="🎯 Live", player="PLR0", line="P0: 90%", rank=9
            )
            await until(lambda: under.worker.counts.delivered == 2, 20.0, "the edit")
        (edited,) = sandbox.messages(LOUNGE)  # still one message, edited in place
        assert edited.message_id == status.message_id
        assert edited.edits == 1
        assert edited.text.splitlines()[1] == "P0: 90%"  # best first
        assert under.worker.counts.delivered == 2
    finally:
        await Valkey(queue.wire).delete_matching([NotifyKeys(queue.name).pattern()])

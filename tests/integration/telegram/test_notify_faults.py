"""Faults through the real notification worker and the sandbox: 5xx and HTML 502 answers, a user
who blocked the bot, a 429 with ``retry_after``, bad requests, edits, and malformed jobs."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from aiogram import Bot
from notify_rig import rig, running, until

from codemojex.notify.api import Notification, Skipped
from codemojex.notify.delivery import Transient
from codemojex.notify.policy import NotifyOptions
from codemojex.notify.rate import NotifyLimits
from codemojex.notify.worker import NotifyWorker
from codemojex.telegram.sandbox import Faults, Sandbox
from echomq import Cool, InvalidArgument, Job, Queue, Retry
from echomq.engine import Minter

ADA, BOB, CY = 1001, 1002, 1003


async def test_5xx_and_html_502_answers_are_retried_until_all_are_delivered_once(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    sandbox.set_faults(Faults(error_rate=0.1, html_share=0.5, seed=11))
    chats = list(range(5001, 5011))
    for chat in chats:
        sandbox.add_user(chat, f"user {chat}")
    under = rig(queue, sandbox_bot)
    async with running(under.consumer):
        for chat in chats:
            for n in range(8):
                await under.notifier.notify(chat, f"note {n} for {chat}")
        await until(lambda: under.worker.counts.delivered == 80, 60.0, "80 deliveries")
    counts, stats = under.worker.counts, sandbox.stats
    assert stats.faults > 0
    assert counts.retried == stats.faults
    assert (counts.dead, counts.dropped, counts.too_many_requests) == (0, 0, 0)
    for chat in chats:
        texts = Counter(m.text for m in sandbox.messages(chat))
        assert texts == Counter(f"note {n} for {chat}" for n in range(8))  # all, none twice
    assert (await queue.counts()).pending == 0


async def test_each_chat_gets_its_messages_in_order_through_retries_and_two_consumers(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    """The issue's ABCDABCD: two consumers (as two processes would be) and 5xx answers that
    send a message back to retry; each chat's lane is ordered, so its retried head holds it."""
    sandbox.set_faults(Faults(error_rate=0.25, seed=3))
    chats = list(range(5101, 5105))
    for chat in chats:
        sandbox.add_user(chat, f"user {chat}")
    first, second = rig(queue, sandbox_bot), rig(queue, sandbox_bot)
    async with running(first.consumer), running(second.consumer):
        await until(queue.is_ordered, 20.0, "the queue ordered by its consumers")
        for n in range(8):
            for chat in chats:
                await first.notifier.notify(chat, f"{'ABCD'[n % 4]}{n}")

        def delivered() -> bool:
            return first.worker.counts.delivered + second.worker.counts.delivered == 32

        await until(delivered, 60.0, "32 deliveries")
    assert sandbox.stats.faults > 0
    for chat in chats:
        assert [m.text for m in sandbox.messages(chat)] == [f"{'ABCD'[n % 4]}{n}" for n in range(8)]


async def test_a_blocked_user_is_dropped_once_and_then_skipped_by_the_notifier(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    sandbox.block(BOB)
    under = rig(queue, sandbox_bot)
    async with running(under.consumer):
        await under.notifier.notify(BOB, "you won't see this")
        await under.notifier.notify(BOB, "nor this")  # in the lane before the 403 is known
        await under.notifier.notify(ADA, "hello Ada")
        await until(lambda: under.worker.counts.dropped == 2, 20.0, "both of Bob's dropped")
        await sandbox.wait_for_messages(ADA, 1)
        later = await under.notifier.notify(BOB, "still blocked")
    assert isinstance(later, Skipped)
    assert str(later) == "skipped: chat blocked"
    assert sandbox.stats.forbidden == 1  # one 403: the second saw the mark and never went out
    assert await under.notifier.blocklist.chats() == {BOB}
    counts = under.worker.counts
    assert (counts.delivered, counts.dropped, counts.blocked, counts.dead) == (1, 2, 1, 0)
    assert (await queue.counts()).pending == 0  # "still blocked" was never enqueued
    assert sandbox.messages(BOB) == []
    assert await under.notifier.blocklist.unmark(BOB)
    assert not isinstance(await under.notifier.notify(BOB, "welcome back"), Skipped)


class ClockedWorker(NotifyWorker):
    """Notes when each transient answer (the 429) came back, to time the retry against it."""

    answered_at: list[float]

    async def _again(
        self, job: Job, notification: Notification, outcome: Transient
    ) -> Retry | Cool:
        self.answered_at = [*getattr(self, "answered_at", []), time.monotonic()]
        return await super()._again(job, notification, outcome)


async def test_a_429_cools_the_chats_lane_for_retry_after_and_spends_no_attempt(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    """The refused message waits out ``retry_after``, and so does the chat's next one: the
    chat's lane cools in the engine (echomq's ``Cool``); another chat is served meanwhile."""
    sandbox.force_429(CY, retry_after=2)
    under = rig(queue, sandbox_bot, worker=ClockedWorker)
    async with running(under.consumer):
        await under.notifier.notify(CY, "after the flood control")
        await under.notifier.notify(CY, "and this one too")
        await until(lambda: under.worker.counts.too_many_requests == 1, 20.0, "the 429")
        info = await queue.lane(str(CY)).info()
        assert info.cooling > 1.0  # the chat's lane is off the ring, for every worker
        await under.notifier.notify(ADA, "not held by Cy's flood control")
        (other,) = await sandbox.wait_for_messages(ADA, 1, timeout=20.0)
        sent = await sandbox.wait_for_messages(CY, 2, timeout=20.0)
    worker = under.worker
    assert isinstance(worker, ClockedWorker)
    (refused_at,) = worker.answered_at
    assert all(message.at - refused_at >= 2.0 for message in sent)
    assert other.at - refused_at < 2.0
    assert [m.text for m in sent] == ["after the flood control", "and this one too"]
    assert sandbox.stats.too_many_requests == 1
    counts = worker.counts
    # No retry: the refused message went back unspent (its attempts stay those of one claim).
    assert (counts.too_many_requests, counts.retried, counts.delivered) == (1, 0, 3)
    # The chat's lane is off the ring: its next message is never claimed early to be deferred.
    assert counts.deferred == 0


async def test_bad_requests_are_dropped_and_counted(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    under = rig(queue, sandbox_bot)
    async with running(under.consumer):
        await under.notifier.notify(999_999, "to a chat that does not exist")
        await under.notifier.notify(ADA, "x" * 5000)  # too long for Telegram
        await under.notifier.notify(ADA, "")  # empty
        await under.notifier.notify(ADA, "fine", markup={"inline_keyboard": "not rows"})
        await under.notifier.notify(ADA, "the good one")
        await sandbox.wait_for_messages(ADA, 1)
        await until(lambda: under.worker.counts.dropped == 4, 20.0, "four drops")
    assert [m.text for m in sandbox.messages(ADA)] == ["the good one"]
    assert sandbox.stats.bad_requests == 3  # the bad markup never left: it is no keyboard
    assert under.worker.counts.dead == 0
    assert (await queue.counts()).pending == 0


async def test_an_edit_that_changes_nothing_counts_as_delivered(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    under = rig(queue, sandbox_bot)
    async with running(under.consumer):
        await under.notifier.notify(ADA, "board v1")
        (first,) = await sandbox.wait_for_messages(ADA, 1)
        await under.notifier.notify(ADA, "board v2", edit=first.message_id)
        await under.notifier.notify(ADA, "board v2", edit=first.message_id)  # not modified
        await until(lambda: under.worker.counts.delivered == 3, 20.0, "three deliveries")
    (only,) = sandbox.messages(ADA)
    assert (only.text, only.edits) == ("board v2", 1)
    assert under.worker.counts.dropped == 0


async def test_a_malformed_job_goes_to_the_dead_letters_with_its_reason(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    under = rig(queue, sandbox_bot)
    async with running(under.consumer):
        with pytest.raises(InvalidArgument, match="chat"):  # the task refuses it, writing nothing
            await under.task.enqueue(notification="NOT?", chat="not a number", text="hi")
        # Written by hand (another producer, an older version): the worker refuses it.
        args = {"notification": "NOT?", "chat": "not a number", "text": "hi"}
        bad = await queue.enqueue({"task": "notify", "args": args}, lane="x")
        await under.notifier.notify(ADA, "after the bad one")
        await sandbox.wait_for_messages(ADA, 1)
        await until(lambda: under.worker.counts.dead == 1, 20.0, "the dead letter")
    info = await queue.job(bad.id)
    assert info is not None
    assert info.state == "dead"
    assert info.last_error is not None
    assert "malformed notification payload: ValueError" in info.last_error
    assert (await queue.counts()).pending == 0


async def test_deferrals_spend_no_attempts_and_six_failures_go_dead_with_the_last_error(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    sandbox.set_faults(Faults(error_rate=1.0, html_share=0.5, seed=3))
    # A tiny chat budget and no holding: every attempt after the first is deferred first.
    limits = NotifyLimits(chat_rate=1.0, chat_burst=1)
    options = NotifyOptions(limits=limits, backoff_base=0.01, hold=0.0)
    under = rig(queue, sandbox_bot, options=options)
    async with running(under.consumer):
        verdict = await under.notifier.notify(ADA, "never arrives")
        await until(lambda: under.worker.counts.dead == 1, 30.0, "the dead letter")
    counts = under.worker.counts
    assert sandbox.stats.faults == 6  # six sends, no seventh
    assert counts.retried == 5
    assert counts.deferred >= 1  # had a deferral spent an attempt, fewer than six would go out
    info = await queue.job(verdict.id)  # type: ignore[union-attr]
    assert info is not None
    assert info.state == "dead"
    assert info.last_error is not None
    assert "Retry:" in info.last_error
    assert ("ServerError" in info.last_error) or ("ClientDecodeError" in info.last_error)


async def test_a_notification_already_delivered_is_not_sent_again(
    sandbox: Sandbox, sandbox_bot: Bot, queue: Queue
) -> None:
    """Two jobs carrying one NOT id (a redelivery after a lost complete looks the same)."""
    note = Notification(Minter().mint("NOT"), ADA, "exactly once")
    under = rig(queue, sandbox_bot)
    async with running(under.consumer):
        once = under.task.using(lane=str(ADA))
        await once.enqueue(**note.payload())
        await sandbox.wait_for_messages(ADA, 1)
        await once.enqueue(**note.payload())
        await until(lambda: under.worker.counts.duplicates == 1, 20.0, "the duplicate skipped")
    assert [m.text for m in sandbox.messages(ADA)] == ["exactly once"]
    assert under.worker.counts.delivered == 1

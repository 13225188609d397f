"""A command job run twice (its lease reaped after a crash that followed the charge) charges
once: the guess is recorded under the command job's id, a conversion's debit references it.
The handler is called directly with the same job, as the consumer would after a reap."""

from __future__ import annotations

import copy
from typing import Any

from bot_rig import ADA, bot_fixture, secret_of, wait_for_text  # noqa: F401
from sqlalchemy import func, select

from codemojex.app import BotStack
from codemojex.bot.worker import CommandWorker, Handled
from codemojex.domain import Currency
from codemojex.store import balances, find_player
from codemojex.store.exchange import CONVERT_REASON
from codemojex.store.guesses import GUESS_REASON
from codemojex.store.models import GuessRow, LedgerRow
from codemojex.store.wallets import credit
from codemojex.telegram.sandbox import Sandbox
from echomq import Job


def _update(template: dict[str, Any], update_id: int, text: str) -> dict[str, Any]:
    """A copy of ``template`` (an update the sandbox made) saying ``text`` as a new update."""
    update = copy.deepcopy(template)
    update["update_id"] = update_id
    message = update["message"]
    message["text"] = text
    message["message_id"] = message["message_id"] + 1000
    command = text.split(maxsplit=1)[0]
    message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(command)}]
    return update


async def _run_twice(bot: BotStack, update: dict[str, Any]) -> None:
    worker = CommandWorker(bot.services)
    job_id = bot.services.minter.mint("JOB")
    for attempt in (1, 2):  # the second: the same job after its lease was reaped
        job = Job(job_id, update, attempt, str(ADA), 0)
        assert await worker.handle(update, job) is Handled.ROUTED


async def _ledger_rows(bot: BotStack, player: str, reason: str) -> int:
    async with bot.pipeline.store.read() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(LedgerRow)
            .where(LedgerRow.player_id == player, LedgerRow.reason == reason)
        )
    return int(count or 0)


async def test_a_guess_job_run_twice_is_charged_once(sandbox: Sandbox, bot: BotStack) -> None:
    played = sandbox.say(ADA, "/play")
    await wait_for_text(sandbox, ADA, "started a new game")
    secret = await secret_of(bot.pipeline.store, ADA)
    async with bot.pipeline.store.read() as session:
        ada = await find_player(session, ADA)
        assert ada is not None
        before = await balances(session, ada.id)

    guess = "/guess " + "".join(reversed(secret))  # not the code: the game stays open
    await _run_twice(bot, _update(played, 900_000_001, guess))

    async with bot.pipeline.store.read() as session:
        after = await balances(session, ada.id)
        guesses = await session.scalar(
            select(func.count()).select_from(GuessRow).where(GuessRow.player_id == ada.id)
        )
    assert guesses == 1
    assert await _ledger_rows(bot, ada.id, GUESS_REASON) == 1
    assert (before.keys + before.clips) - (after.keys + after.clips) == 1  # one fee, not two
    await wait_for_text(sandbox, ADA, "Ada: ")  # scored once


async def test_a_convert_job_run_twice_converts_once(sandbox: Sandbox, bot: BotStack) -> None:
    said = sandbox.say(ADA, "/me")
    await wait_for_text(sandbox, ADA, "diamonds")
    async with bot.pipeline.store.transaction() as session:
        ada = await find_player(session, ADA)
        assert ada is not None
        await credit(session, ada.id, Currency.DIAMONDS, 30, "test", minter=bot.services.minter)

    await _run_twice(bot, _update(said, 900_000_002, "/convert 10"))

    async with bot.pipeline.store.read() as session:
        after = await balances(session, ada.id)
    assert (after.diamonds, after.keys) == (20, 1)
    assert await _ledger_rows(bot, ada.id, CONVERT_REASON) == 2  # one debit, one credit
    first = await wait_for_text(sandbox, ADA, "Converted 10 💎 into 1 🔑")
    assert "You now have 1 🔑 and 20 💎" in first.text

"""Telegram's limits and injected faults as the sandbox enforces them: 429 with retry_after per
chat, per group and overall; a forced 429; 5xx and HTML 502 answers that deliver nothing."""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import AsyncIterator

import pytest
from aiogram import Bot
from aiogram.exceptions import ClientDecodeError, TelegramRetryAfter, TelegramServerError

from codemojex.telegram import TelegramConfig, open_bot
from codemojex.telegram.sandbox import LOUNGE, Faults, Sandbox, SandboxLimits, SandboxOptions
from codemojex.telegram.sandbox.limiter import Limiter


async def started(limits: SandboxLimits) -> AsyncIterator[tuple[Sandbox, Bot]]:
    options = SandboxOptions(control_token=secrets.token_urlsafe(16), limits=limits)
    async with Sandbox(options) as sandbox:
        bot = open_bot(TelegramConfig(options.bot_token, base=sandbox.url))
        try:
            yield sandbox, bot
        finally:
            await bot.session.close()


@pytest.fixture
async def wide_chats() -> AsyncIterator[tuple[Sandbox, Bot]]:
    """Chat buckets out of the way, so the group and global buckets are what refuses."""
    async for pair in started(SandboxLimits(chat_rate=100.0, chat_burst=100)):
        yield pair


async def test_a_burst_over_a_chats_budget_waits_retry_after(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    for n in range(4):
        await sandbox_bot.send_message(1001, f"burst {n}")
    with pytest.raises(TelegramRetryAfter) as refused:
        await sandbox_bot.send_message(1001, "one too many")
    assert refused.value.retry_after >= 1
    assert "Too Many Requests: retry after" in refused.value.message
    assert sandbox.stats.too_many_requests == 1
    assert len(sandbox.messages(1001)) == 4
    # Another chat has a budget of its own.
    await sandbox_bot.send_message(1002, "elsewhere")
    await asyncio.sleep(refused.value.retry_after)  # the wait under test
    await sandbox_bot.send_message(1001, "after the wait")
    assert [m.text for m in sandbox.messages(1001)][-1] == "after the wait"


async def test_a_forced_429_holds_the_chat_for_retry_after(
    sandbox: Sandbox, sandbox_bot: Bot
) -> None:
    sandbox.force_429(1002, retry_after=1)
    with pytest.raises(TelegramRetryAfter) as refused:
        await sandbox_bot.send_message(1002, "first")
    assert refused.value.retry_after == 1
    with pytest.raises(TelegramRetryAfter):
        await sandbox_bot.send_message(1002, "too early")
    await asyncio.sleep(1.05)  # the wait under test
    await sandbox_bot.send_message(1002, "on time")
    assert [m.text for m in sandbox.messages(1002)] == ["on time"]
    assert sandbox.stats.too_many_requests == 2


async def test_a_group_gets_20_a_minute_after_its_burst(
    wide_chats: tuple[Sandbox, Bot],
) -> None:
    sandbox, bot = wide_chats
    for n in range(21):
        await bot.send_message(LOUNGE, f"group {n}")
    with pytest.raises(TelegramRetryAfter) as refused:
        await bot.send_message(LOUNGE, "one too many")
    assert 1 <= refused.value.retry_after <= 3
    assert sandbox.stats.by_chat == {LOUNGE: 21}


async def test_the_global_budget_spans_every_chat(wide_chats: tuple[Sandbox, Bot]) -> None:
    sandbox, bot = wide_chats
    users = range(2000, 2060)
    for user in users:
        sandbox.add_user(user, f"u{user}")
    loop = asyncio.get_running_loop()
    began = loop.time()
    outcomes = await asyncio.gather(
        *(bot.send_message(user, "hi") for user in users), return_exceptions=True
    )
    elapsed = loop.time() - began
    refused = [o for o in outcomes if isinstance(o, TelegramRetryAfter)]
    assert len(refused) + sandbox.stats.delivered == len(users)
    assert refused
    assert {r.retry_after for r in refused} == {1}
    # Never more than the burst plus what the global bucket refilled meanwhile.
    assert 35 <= sandbox.stats.delivered <= 35 + 30 * elapsed + 1


async def test_limits_can_be_turned_off_for_a_demo() -> None:
    async for sandbox, bot in started(SandboxLimits(is_enforced=False)):
        for n in range(10):
            await bot.send_message(1001, f"n{n}")
        assert sandbox.stats.too_many_requests == 0


@pytest.mark.parametrize(
    ("html_share", "raised"), [(0.0, TelegramServerError), (1.0, ClientDecodeError)]
)
async def test_a_faulted_send_is_not_delivered(
    sandbox: Sandbox, sandbox_bot: Bot, html_share: float, raised: type[Exception]
) -> None:
    sandbox.set_faults(Faults(error_rate=1.0, html_share=html_share, seed=1))
    with pytest.raises(raised):
        await sandbox_bot.send_message(1001, "lost")
    assert sandbox.messages(1001) == []
    assert sandbox.stats.faults == 1
    sandbox.set_faults(Faults())
    await sandbox_bot.send_message(1001, "through")
    assert [m.text for m in sandbox.messages(1001)] == ["through"]


async def test_a_fault_rate_is_drawn_repeatably(sandbox: Sandbox, sandbox_bot: Bot) -> None:
    sandbox.set_faults(Faults(error_rate=0.5, html_share=0.5, seed=7))
    for user in range(3000, 3040):
        sandbox.add_user(user, f"u{user}")
    outcomes = []
    for user in range(3000, 3040):
        try:
            await sandbox_bot.send_message(user, "x")
            outcomes.append("ok")
        except TelegramServerError:
            outcomes.append("500")
        except ClientDecodeError:
            outcomes.append("502")
    assert {"ok", "500", "502"} <= set(outcomes)
    assert sandbox.stats.faults == outcomes.count("500") + outcomes.count("502")
    assert sandbox.stats.delivered == outcomes.count("ok")


async def test_latency_delays_every_answer(sandbox: Sandbox, sandbox_bot: Bot) -> None:
    sandbox.set_faults(Faults(latency=0.3))
    loop = asyncio.get_running_loop()
    began = loop.time()
    await sandbox_bot.get_me()
    assert loop.time() - began >= 0.3


@pytest.mark.parametrize(
    "bad",
    [
        {"error_rate": 1.5},
        {"error_rate": -0.1},
        {"html_share": 2.0},
        {"latency": -1.0},
    ],
)
def test_bad_faults_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="Faults"):
        Faults(**bad)


@pytest.mark.parametrize("bad", [{"chat_rate": 0.0}, {"global_burst": 0}, {"group_rate": -1.0}])
def test_bad_limits_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="SandboxLimits"):
        SandboxLimits(**bad)  # type: ignore[arg-type]


class ManualClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_limiter_never_admits_more_than_burst_plus_rate_in_any_window() -> None:
    clock = ManualClock()
    limiter = Limiter(SandboxLimits(), clock)
    draw = random.Random(3)
    admitted: dict[int, list[float]] = {}
    for _ in range(5000):
        clock.now += draw.expovariate(40.0)
        chat = draw.choice([1001, 1002, LOUNGE])
        if limiter.verdict(chat) is None:
            admitted.setdefault(chat, []).append(clock.now)
    for chat, times in admitted.items():
        rate, burst = (20 / 60, 21) if chat < 0 else (1.0, 4)
        for first, start in enumerate(times):
            for last in range(first, len(times)):
                span = times[last] - start
                assert last - first + 1 <= burst + rate * span + 1e-9
    everything = sorted(t for times in admitted.values() for t in times)
    for first, start in enumerate(everything):
        for last in range(first, min(len(everything), first + 200)):
            assert last - first + 1 <= 35 + 30 * (everything[last] - start) + 1e-9


def test_a_refused_send_takes_no_token() -> None:
    clock = ManualClock()
    limiter = Limiter(SandboxLimits(), clock)
    assert [limiter.verdict(1001) for _ in range(4)] == [None] * 4
    assert [limiter.verdict(1001) for _ in range(10)] == [1] * 10
    clock.now += 1.0
    assert limiter.verdict(1001) is None

"""``codemojex up`` with ``TELEGRAM_BOT_TOKEN`` set talks to the Bot API it names instead of
starting a sandbox: here ``TELEGRAM_API_BASE`` points it at a sandbox this test runs (as the
real Telegram would be), with a token of its own that must never be printed."""

from __future__ import annotations

from pathlib import Path

from up_rig import codemojex_up

from codemojex.telegram.sandbox import Sandbox, SandboxOptions

TOKEN = "424242:the-operators-own-secret"


async def test_with_a_token_the_game_talks_to_that_bot_api_and_never_prints_it(
    tmp_path: Path,
) -> None:
    async with Sandbox(SandboxOptions(bot_token=TOKEN)) as telegram:
        env = {"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_API_BASE": telegram.url}
        async with codemojex_up(tmp_path, env) as run:
            telegram.say(1001, "/help")
            [reply] = await telegram.wait_for_messages(1001, 1, timeout=20.0)
        output = "".join(run.lines)
    assert "/play" in reply.text
    assert "telegram: using TELEGRAM_BOT_TOKEN" in output
    assert "sandbox ready" not in output
    assert "chat page" not in output
    assert "the-operators-own-secret" not in output
    assert run.process.returncode == 0

"""A sandbox with a data directory comes back as it was: its chats (users, groups, every message,
edits, blocks) and its control token, kept in files only the owner can read, written atomically;
a file it did not write is refused with a clear error, never half-read."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import aiohttp
import pytest
from aiogram.exceptions import TelegramForbiddenError

from codemojex.telegram import TelegramConfig, open_bot
from codemojex.telegram.sandbox import LOUNGE, Sandbox, SandboxError, SandboxOptions
from codemojex.telegram.sandbox.archive import write_private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_restart_on_the_same_data_keeps_the_chats_and_the_token(tmp_path: Path) -> None:
    data = tmp_path / "sandbox"
    options = SandboxOptions(data_dir=data)
    async with Sandbox(options) as first:
        token = first.options.control_token
        first.say(1001, "/play")
        first.say(1002, "hi all", chat=LOUNGE)
        first.say(1042, "a newcomer")  # a user made on the fly is kept too
        first.add_group(-2002, "Side room", [1003])
        first.say(1004, "I join", chat=-2002)  # joins by writing
        first.block(1003)
        bot = open_bot(TelegramConfig(first.options.bot_token, base=first.url))
        try:
            sent = await bot.send_message(1001, "pick", reply_markup=keyboard())
            await bot.edit_message_text("picked", chat_id=1001, message_id=sent.message_id)
        finally:
            await bot.session.close()
        history = first.history(1001)
    assert mode(data) == 0o700
    assert mode(data / "tokens.json") == 0o600
    assert mode(data / "chats.json") == 0o600
    assert token in (data / "tokens.json").read_text()

    async with Sandbox(options) as again:
        assert again.options.control_token == token  # the old link still works
        assert again.history(1001) == history
        [picked] = again.messages(1001)
        assert (picked.text, picked.edits, picked.reply_markup) == ("picked", 1, None)
        assert again.history(1042)[0]["text"] == "a newcomer"
        side = next(c for c in await state(again) if c["id"] == -2002)
        assert side["members"] == [1003, 1004]
        # Message ids go on where they stopped, as on Telegram.
        assert again.say(1001, "/me")["message"]["message_id"] == history[-1]["message_id"] + 1
        bot = open_bot(TelegramConfig(again.options.bot_token, base=again.url))
        try:
            with pytest.raises(TelegramForbiddenError, match="blocked"):
                await bot.send_message(1003, "still blocked")
        finally:
            await bot.session.close()


async def test_a_change_is_written_soon_not_only_at_stop(tmp_path: Path) -> None:
    async with Sandbox(SandboxOptions(data_dir=tmp_path)) as sandbox:
        sandbox.say(1001, "kept before any stop")
        chats = tmp_path / "chats.json"
        for _ in range(200):  # a file has no event to wait on: look again, 10 s at most
            if chats.exists() and "kept before any stop" in chats.read_text():
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the change was not written while the sandbox ran")


def keyboard() -> dict[str, object]:
    return {"inline_keyboard": [[{"text": "🍒", "callback_data": "c"}]]}


async def state(sandbox: Sandbox) -> list[dict[str, object]]:
    headers = {"X-Sandbox-Token": sandbox.options.control_token}
    async with (
        aiohttp.ClientSession(headers=headers) as http,
        http.get(f"{sandbox.url}/sandbox/state") as answer,
    ):
        chats: list[dict[str, object]] = (await answer.json())["result"]["chats"]
    return chats


def test_a_token_given_in_the_options_wins_and_is_never_written(tmp_path: Path) -> None:
    kept = Sandbox(SandboxOptions(data_dir=tmp_path)).options.control_token
    chosen = SandboxOptions(data_dir=tmp_path, control_token="the-operators-choice")
    assert Sandbox(chosen).options.control_token == "the-operators-choice"
    text = (tmp_path / "tokens.json").read_text()
    assert kept in text
    assert "the-operators-choice" not in text
    assert Sandbox(SandboxOptions(data_dir=tmp_path)).options.control_token == kept


async def test_without_a_data_dir_nothing_is_written_and_every_start_is_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first, second = Sandbox(), Sandbox()
    assert first.options.control_token != second.options.control_token
    async with first:
        first.say(1001, "hello")
    assert os.listdir(tmp_path) == []


def test_a_kept_file_readable_by_others_is_made_the_owners_alone(tmp_path: Path) -> None:
    token = Sandbox(SandboxOptions(data_dir=tmp_path)).options.control_token
    os.chmod(tmp_path / "tokens.json", 0o644)
    assert Sandbox(SandboxOptions(data_dir=tmp_path)).options.control_token == token
    assert mode(tmp_path / "tokens.json") == 0o600


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("tokens.json", "not json"),
        ("tokens.json", '{"control_token": "short"}'),
        ("chats.json", '{"format": 99, "blocked": [], "world": {}}'),
        ("chats.json", '{"format": 1, "blocked": [], "world": {"users": [{"id": 1}]}}'),
        ("chats.json", "[" * 100_000),
    ],
)
def test_a_kept_file_the_sandbox_did_not_write_is_refused_by_name(
    tmp_path: Path, name: str, content: str
) -> None:
    write_private(tmp_path / name, content.encode())
    with pytest.raises(SandboxError, match=f"cannot use {tmp_path / name}.*move it away"):
        Sandbox(SandboxOptions(data_dir=tmp_path))


def test_an_atomic_write_leaves_no_temporary_file_and_replaces_the_old_one(tmp_path: Path) -> None:
    target = tmp_path / "chats.json"
    write_private(target, b"old")
    write_private(target, json.dumps({"new": True}).encode())
    assert json.loads(target.read_text()) == {"new": True}
    assert [p.name for p in tmp_path.iterdir()] == ["chats.json"]
    assert mode(target) == 0o600

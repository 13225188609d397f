"""The pure parts of the gateway and the command worker: which lane an update rides, what is a
malformed update, the webhook secret check, token redaction, reading ``/convert``'s amount,
what a bare message counts as, and the per-lane lock's order."""

from __future__ import annotations

import asyncio

import pytest

from codemojex.bot.api import update_chat, update_dedup_key, update_id_of
from codemojex.bot.context import CommandOptions
from codemojex.bot.gateway import PollingOptions
from codemojex.bot.routers.convert import parse_amount
from codemojex.bot.routers.guess import looks_like_emojis
from codemojex.bot.webhook import WebhookOptions, is_authorised, new_secret
from codemojex.bot.worker import LaneLocks
from codemojex.telegram.transport import redact

CHAT = {"id": -1001, "type": "group"}


def test_a_message_rides_its_chats_lane() -> None:
    assert update_chat({"update_id": 1, "message": {"chat": CHAT}}) == -1001
    assert update_chat({"update_id": 1, "edited_message": {"chat": {"id": 5}}}) == 5


def test_a_callback_rides_the_chat_of_its_message_or_the_user() -> None:
    on_message = {"callback_query": {"from": {"id": 7}, "message": {"chat": CHAT}}}
    inline = {"callback_query": {"from": {"id": 7}}}
    assert update_chat(on_message) == -1001
    assert update_chat(inline) == 7


def test_an_update_without_a_chat_has_no_lane() -> None:
    assert update_chat({"update_id": 1, "inline_query": {"from": {"id": 7}}}) is None
    assert update_chat({"update_id": 1, "message": {"chat": {"id": "not a number"}}}) is None


@pytest.mark.parametrize(
    "update", ["text", 12, None, [], {}, {"update_id": "1"}, {"update_id": True}]
)
def test_malformed_updates_have_no_id(update: object) -> None:
    assert update_id_of(update) is None


def test_the_dedup_key_names_the_update() -> None:
    assert update_dedup_key(42) == "update:42"


def test_the_secret_is_compared_whole() -> None:
    assert is_authorised("s3cret", "s3cret")
    assert not is_authorised(None, "s3cret")
    assert not is_authorised("", "s3cret")
    assert not is_authorised("s3cre", "s3cret")
    assert not is_authorised("s3cretx", "s3cret")
    assert not is_authorised("sé", "s3cret")


def test_webhook_options_refuse_a_secret_telegram_would_refuse() -> None:
    assert len(new_secret()) >= 32
    for bad in ("", "has space", "x" * 257, "semi;colon"):
        with pytest.raises(ValueError, match="secret"):
            WebhookOptions(secret=bad)
    assert "abc123" not in repr(WebhookOptions(secret="abc123"))


def test_polling_options_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match=r"limit is 1\.\.100"):
        PollingOptions(limit=0)
    with pytest.raises(ValueError, match="backoff is seconds > 0"):
        PollingOptions(backoff=0)


def test_the_token_is_cut_out_of_error_texts() -> None:
    text = "Cannot connect to https://api.telegram.org/bot123:ABC/getUpdates (ABC)"
    assert (
        redact(text, "123:ABC")
        == "Cannot connect to https://api.telegram.org/bot<token>/getUpdates (<token>)"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ("10", 10),
        (" 120 ", 120),
        (None, "Usage"),
        ("", "Usage"),
        ("abc", "not a whole number"),
        ("١٠", "not a whole number"),  # Arabic-Indic digits are digits, but not ours
        ("5", "Cannot convert 5"),
        ("0", "Cannot convert 0"),
        ("-20", "Cannot convert -20"),
        ("10 20", "One number"),
    ],
)
def test_convert_reads_a_positive_multiple_of_ten(args: str | None, expected: int | str) -> None:
    amount = parse_amount(args)
    if isinstance(expected, int):
        assert amount == expected
    else:
        assert isinstance(amount, str)
        assert expected in amount


def test_a_bare_message_is_a_guess_when_it_has_no_words() -> None:
    assert looks_like_emojis("🍎🍌🍒🍇🐶🐱")
    assert looks_like_emojis("🍎 🍌, 🍒")
    assert not looks_like_emojis("hello 🍎")
    assert not looks_like_emojis("/play")
    assert not looks_like_emojis("   ")


def test_command_options_refuse_an_unknown_set() -> None:
    with pytest.raises(ValueError, match="no such set"):
        CommandOptions(emoji_set="nope")


async def test_lane_locks_keep_arrival_order_and_forget_idle_lanes() -> None:
    locks = LaneLocks()
    order: list[int] = []
    gate = asyncio.Event()

    async def job(n: int) -> None:
        async with locks.hold("chat"):
            if n == 0:
                await gate.wait()
            await asyncio.sleep(0)
            order.append(n)

    tasks = [asyncio.ensure_future(job(n)) for n in range(5)]
    await asyncio.sleep(0)
    assert len(locks) == 1
    gate.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert len(locks) == 0

"""The sandbox's Bot API on the wire, without aiogram: Telegram's envelopes, status codes and
content types, and the ways a call may carry its parameters."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from codemojex.telegram.sandbox import Faults, Sandbox


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def api(sandbox: Sandbox, method: str, token: str | None = None) -> str:
    return f"{sandbox.url}/bot{token or sandbox.options.bot_token}/{method}"


async def test_success_is_ok_with_a_result(sandbox: Sandbox, http: aiohttp.ClientSession) -> None:
    async with http.get(api(sandbox, "getMe")) as response:
        assert response.status == 200
        assert response.content_type == "application/json"
        body = await response.json()
    assert body["ok"] is True
    assert body["result"]["id"] == 100000


@pytest.mark.parametrize(
    ("token", "method", "status", "description"),
    [
        ("100000:wrong", "getMe", 401, "Unauthorized"),
        ("100000:wrong", "noSuchMethod", 401, "Unauthorized"),
        (None, "noSuchMethod", 404, "Not Found"),
    ],
)
async def test_errors_carry_telegrams_envelope(
    sandbox: Sandbox,
    http: aiohttp.ClientSession,
    token: str | None,
    method: str,
    status: int,
    description: str,
) -> None:
    async with http.post(api(sandbox, method, token)) as response:
        assert response.status == status
        body = await response.json()
    assert body == {"ok": False, "error_code": status, "description": description}


async def test_method_names_ignore_case_and_take_query_or_json(
    sandbox: Sandbox, http: aiohttp.ClientSession
) -> None:
    async with http.get(api(sandbox, "SENDMESSAGE"), params={"chat_id": "1001", "text": "q"}):
        pass
    async with http.post(api(sandbox, "sendMessage"), json={"chat_id": 1001, "text": "j"}):
        pass
    async with http.post(api(sandbox, "sendmessage"), data={"chat_id": "1001", "text": "f"}):
        pass
    assert [m.text for m in sandbox.messages(1001)] == ["q", "j", "f"]


async def test_a_429_names_retry_after_in_its_parameters(
    sandbox: Sandbox, http: aiohttp.ClientSession
) -> None:
    sandbox.force_429(1001, retry_after=7)
    async with http.post(api(sandbox, "sendMessage"), json={"chat_id": 1001, "text": "x"}) as r:
        assert r.status == 429
        body = await r.json()
    assert body == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 7",
        "parameters": {"retry_after": 7},
    }


async def test_a_502_fault_is_an_html_page(sandbox: Sandbox, http: aiohttp.ClientSession) -> None:
    sandbox.set_faults(Faults(error_rate=1.0, html_share=1.0))
    async with http.post(api(sandbox, "sendMessage"), json={"chat_id": 1001, "text": "x"}) as r:
        assert r.status == 502
        assert r.content_type == "text/html"
        assert "502 Bad Gateway" in await r.text()


async def test_a_500_fault_is_json(sandbox: Sandbox, http: aiohttp.ClientSession) -> None:
    sandbox.set_faults(Faults(error_rate=1.0))
    async with http.post(api(sandbox, "sendMessage"), json={"chat_id": 1001, "text": "x"}) as r:
        assert r.status == 500
        body = await r.json()
    assert body["ok"] is False
    assert body["error_code"] == 500


@pytest.mark.parametrize(
    ("payload", "description"),
    [
        ({"text": "no chat"}, "Bad Request: chat_id is empty"),
        ({"chat_id": "@nobody", "text": "x"}, "Bad Request: chat not found"),
        ({"chat_id": 1001}, "Bad Request: message text is empty"),
        ({"chat_id": 1001, "text": "x", "parse_mode": "BBCode"}, "unsupported parse_mode"),
        ({"chat_id": 1001, "text": "x", "reply_markup": "{nope"}, "can't parse reply_markup"),
        (
            {"chat_id": 1001, "text": "x", "reply_markup": "[" * 5_000 + "]" * 5_000},
            "can't parse reply_markup",
        ),
        ({"chat_id": 1001, "text": "x", "reply_markup": {"a": 1}}, "keyboard markup"),
        (
            {"chat_id": 1001, "text": "x", "reply_markup": {"inline_keyboard": [[{"x": 1}]]}},
            "text is required",
        ),
        (
            {
                "chat_id": 1001,
                "text": "x",
                "reply_markup": {"inline_keyboard": [[{"text": "t", "callback_data": "d" * 65}]]},
            },
            "BUTTON_DATA_INVALID",
        ),
    ],
)
async def test_a_malformed_send_is_a_400_and_loses_nothing(
    sandbox: Sandbox, http: aiohttp.ClientSession, payload: dict[str, object], description: str
) -> None:
    async with http.post(api(sandbox, "sendMessage"), json=payload) as response:
        assert response.status == 400
        body = await response.json()
    assert body["error_code"] == 400
    assert description in body["description"]
    assert sandbox.stats.bad_requests == 1
    await_ok = {"chat_id": 1001, "text": "fine"}
    async with http.post(api(sandbox, "sendMessage"), json=await_ok) as response:
        assert response.status == 200


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b'{"chat_id": 1001, "text": "\xff"}',  # not UTF-8
        b"[" * 100_000 + b"]" * 100_000,  # deeper than the parser goes
        b'{"chat_id": 1001, "text": ' + b"[" * 100_000,
    ],
)
async def test_a_body_that_is_not_json_is_a_400(
    sandbox: Sandbox, http: aiohttp.ClientSession, body: bytes
) -> None:
    headers = {"Content-Type": "application/json"}
    async with http.post(api(sandbox, "sendMessage"), data=body, headers=headers) as response:
        assert response.status == 400
        answer = await response.json()
    assert answer == {
        "ok": False,
        "error_code": 400,
        "description": "Bad Request: can't parse JSON request body",
    }
    assert sandbox.stats.bad_requests == 1
    assert sandbox.messages(1001) == []


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8081", "localhost.evil.example"])
async def test_a_bot_api_call_naming_another_host_is_421_and_runs_nothing(
    sandbox: Sandbox, http: aiohttp.ClientSession, host: str
) -> None:
    message = {"chat_id": 1001, "text": "x"}
    headers = {"Host": host}
    async with http.post(api(sandbox, "sendMessage"), json=message, headers=headers) as response:
        assert response.status == 421
        assert (await response.json())["error_code"] == 421
    assert sandbox.messages(1001) == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost:8081", "[::1]:8081", "192.168.1.5"])
async def test_loopback_names_and_ip_addresses_reach_the_bot_api(
    sandbox: Sandbox, http: aiohttp.ClientSession, host: str
) -> None:
    async with http.get(api(sandbox, "getMe"), headers={"Host": host}) as response:
        assert response.status == 200


async def test_the_token_never_shows_in_a_repr(sandbox: Sandbox) -> None:
    assert sandbox.options.bot_token not in repr(sandbox.options)
    assert sandbox.options.control_token not in repr(sandbox.options)

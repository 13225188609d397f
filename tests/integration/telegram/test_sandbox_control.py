"""The sandbox's HTTP control API (the chat page's and process-level tests' way in): guarded by
the control token, clear 400s for bad input, and a live stream of the conversation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiogram import Bot

from codemojex.telegram.sandbox import LOUNGE, Sandbox, SandboxError, SandboxOptions


@pytest.fixture
async def http(sandbox: Sandbox) -> AsyncIterator[aiohttp.ClientSession]:
    headers = {"X-Sandbox-Token": sandbox.options.control_token}
    async with aiohttp.ClientSession(base_url=sandbox.url, headers=headers) as session:
        yield session


async def call(
    http: aiohttp.ClientSession, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, Any]]:
    async with http.request(method, path, json=body) as response:
        return response.status, await response.json()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/sandbox/state"),
        ("POST", "/sandbox/say"),
        ("POST", "/sandbox/tap"),
        ("GET", "/sandbox/chats/1001/history"),
        ("GET", "/sandbox/stream"),
        ("POST", "/sandbox/users/1001/block"),
        ("POST", "/sandbox/users"),
        ("GET", "/sandbox/stats"),
    ],
)
@pytest.mark.parametrize("token", [None, "wrong"])
async def test_without_the_control_token_everything_is_refused(
    sandbox: Sandbox, method: str, path: str, token: str | None
) -> None:
    headers = {"X-Sandbox-Token": token} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, sandbox.url + path, headers=headers, json={}) as response,
    ):
        assert response.status == 403
        assert "control token" in (await response.json())["error"]
    assert sandbox.pending_updates == 0


async def test_the_page_takes_the_token_from_its_query(sandbox: Sandbox) -> None:
    async with aiohttp.ClientSession() as session, session.get(sandbox.chat_page_url) as response:
        assert response.status == 200
        assert response.content_type == "text/html"
        assert "Codemojex sandbox" in await response.text()


@pytest.mark.parametrize(
    ("query", "what"), [("?token=stale-token-0123456789", "started afresh"), ("", "has no token")]
)
async def test_the_page_without_its_token_explains_in_html_where_the_link_is(
    sandbox: Sandbox, query: str, what: str
) -> None:
    async with aiohttp.ClientSession() as session, session.get(f"{sandbox.url}/{query}") as page:
        assert page.status == 403
        assert page.content_type == "text/html"
        assert page.headers["Cache-Control"] == "no-store"
        text = await page.text()
    assert what in text
    assert "codemojex up" in text  # where the current link is printed
    assert "chat page" in text
    assert sandbox.options.control_token not in text


async def test_the_icon_script_and_styles_are_served_without_the_token(sandbox: Sandbox) -> None:
    async with aiohttp.ClientSession(base_url=sandbox.url) as session:
        async with session.get("/favicon.ico") as icon:  # what a browser asks for by itself
            assert icon.status == 200
            assert icon.content_type == "image/svg+xml"
            assert "<svg" in await icon.text()
        for path, kind in (
            ("/static/chat.js", "text/javascript"),
            ("/static/chat.css", "text/css"),
        ):
            async with session.get(path) as asset:
                assert (asset.status, asset.content_type) == (200, kind)
        for path in ("/static/chat.html", "/static/stale.html", "/static/..%2Farchive.py"):
            async with session.get(path) as refused:
                assert refused.status == 404, path
        async with session.get("/", params={"token": sandbox.options.control_token}) as page:
            html = await page.text()
    assert 'rel="icon" href="/static/favicon.svg"' in html


async def test_state_lists_the_predefined_users_and_chats(http: aiohttp.ClientSession) -> None:
    status, body = await call(http, "GET", "/sandbox/state")
    assert status == 200
    names = {user["id"]: user["first_name"] for user in body["result"]["users"]}
    assert names == {1001: "Ada", 1002: "Bob", 1003: "Cy", 1004: "Dee"}
    lounge = next(chat for chat in body["result"]["chats"] if chat["id"] == LOUNGE)
    assert lounge == {
        "id": LOUNGE,
        "type": "group",
        "title": "Codemojex lounge",
        "members": [1001, 1002, 1003, 1004],
    }


async def test_say_and_tap_reach_the_bot(
    sandbox: Sandbox, sandbox_bot: Bot, http: aiohttp.ClientSession
) -> None:
    status, body = await call(http, "POST", "/sandbox/say", {"user": 1002, "text": "/play"})
    assert status == 200
    [update] = await sandbox_bot.get_updates()
    assert update.update_id == body["result"]["update_id"]
    sent = await sandbox_bot.send_message(1002, "go")
    tap = {"user": 1002, "chat": 1002, "message_id": sent.message_id, "data": "🍎"}
    status, body = await call(http, "POST", "/sandbox/tap", tap)
    assert status == 200
    [update] = await sandbox_bot.get_updates(offset=update.update_id + 1)
    assert update.callback_query is not None
    assert update.callback_query.data == "🍎"
    status, body = await call(http, "GET", "/sandbox/chats/1002/history")
    assert [m["text"] for m in body["result"]] == ["/play", "go"]
    assert [m["from"]["is_bot"] for m in body["result"]] == [False, True]


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("/sandbox/say", None, "JSON object"),
        ("/sandbox/say", [1, 2], "JSON object"),
        ("/sandbox/say", {"text": "hi"}, "'user' must be an integer"),
        ("/sandbox/say", {"user": "1001", "text": "hi"}, "'user' must be an integer"),
        ("/sandbox/say", {"user": True, "text": "hi"}, "'user' must be an integer"),
        ("/sandbox/say", {"user": 1001}, "'text' must be a non-empty string"),
        ("/sandbox/say", {"user": 1001, "text": ""}, "'text' must be a non-empty string"),
        ("/sandbox/say", {"user": 1001, "text": "   "}, "text must be a non-empty string"),
        ("/sandbox/say", {"user": 1001, "text": "x" * 4097}, "longer than 4096"),
        ("/sandbox/say", {"user": -5, "text": "hi"}, "positive integer"),
        ("/sandbox/say", {"user": 1001, "chat": 1002, "text": "hi"}, "cannot write in chat"),
        ("/sandbox/say", {"user": 1001, "chat": -77, "text": "hi"}, "cannot write in chat"),
        ("/sandbox/say", {"user": 1001, "chat": "x", "text": "hi"}, "'chat' must be an integer"),
        ("/sandbox/tap", {"user": 1001, "chat": 1001, "data": "x"}, "'message_id' must be"),
        ("/sandbox/tap", {"user": 1001, "chat": 1001, "message_id": 9, "data": "x"}, "no bot"),
        ("/sandbox/tap", {"user": 1001, "chat": 1001, "message_id": 1}, "'data' must be"),
        (
            "/sandbox/tap",
            {"user": 1001, "chat": 1001, "message_id": 1, "data": "d" * 65},
            "1 to 64 bytes",
        ),
    ],
)
async def test_bad_control_input_is_a_clear_400_and_queues_nothing(
    sandbox: Sandbox, http: aiohttp.ClientSession, path: str, body: Any, error: str
) -> None:
    async with http.post(path, data=json.dumps(body) if body is not None else b"{") as response:
        assert response.status == 400
        answer = await response.json()
    assert answer["ok"] is False
    assert error in answer["error"]
    assert sandbox.pending_updates == 0


async def test_a_tap_on_a_users_own_message_is_refused(sandbox: Sandbox) -> None:
    message_id = sandbox.say(1001, "mine")["message"]["message_id"]
    with pytest.raises(SandboxError, match="no bot message"):
        sandbox.tap(1001, 1001, message_id, "x")


@pytest.mark.parametrize(
    ("path", "status"), [("/sandbox/chats/abc/history", 400), ("/sandbox/chats/77/history", 404)]
)
async def test_history_of_a_bad_chat(http: aiohttp.ClientSession, path: str, status: int) -> None:
    answer_status, answer = await call(http, "GET", path)
    assert answer_status == status
    assert answer["ok"] is False


async def test_block_and_unblock_through_http(
    sandbox: Sandbox, sandbox_bot: Bot, http: aiohttp.ClientSession
) -> None:
    assert (await call(http, "POST", "/sandbox/users/1004/block"))[0] == 200
    status, body = await call(http, "GET", "/sandbox/state")
    assert next(u for u in body["result"]["users"] if u["id"] == 1004)["is_blocked"]
    assert (await call(http, "POST", "/sandbox/users/1004/unblock"))[0] == 200
    await sandbox_bot.send_message(1004, "welcome back")
    status, body = await call(http, "GET", "/sandbox/stats")
    assert status == 200
    assert body["result"]["delivered"] == 1
    assert body["result"]["by_chat"] == {"1004": 1}
    assert (await call(http, "POST", "/sandbox/users/abc/block"))[0] == 400


async def test_the_stream_carries_each_new_and_edited_message(
    sandbox: Sandbox, sandbox_bot: Bot, http: aiohttp.ClientSession
) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    async with http.get("/sandbox/stream") as stream:
        assert stream.content_type == "text/event-stream"

        async def read(n: int) -> None:
            event = ""
            async for raw in stream.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event != "stats":
                    events.append((event, json.loads(line.removeprefix("data: "))))
                    if len(events) == n:
                        return

        await stream.content.readuntil(b"\n\n")  # connected: the stream is subscribed
        reading = asyncio.create_task(read(3))
        sandbox.say(1001, "/play")
        sent = await sandbox_bot.send_message(1001, "ok")
        await sandbox_bot.edit_message_text("ok!", chat_id=1001, message_id=sent.message_id)
        async with asyncio.timeout(5):
            await reading
    assert [(kind, m["text"]) for kind, m in events] == [
        ("message", "/play"),
        ("message", "ok"),
        ("edit", "ok!"),
    ]


async def test_stopping_the_sandbox_ends_an_open_stream(sandbox: Sandbox) -> None:
    headers = {"X-Sandbox-Token": sandbox.options.control_token}
    async with (
        aiohttp.ClientSession(headers=headers) as session,
        session.get(sandbox.url + "/sandbox/stream") as stream,
    ):
        await stream.content.readuntil(b"\n\n")
        async with asyncio.timeout(5):
            await sandbox.stop()
            assert await stream.content.read() is not None  # the stream ended


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deep"),
        (b'{"user": 1001, "text": ' + b"[" * 100_000, "nested too deep"),
        (b'{"user": 1001, "text": "\xff"}', "must be a JSON object"),  # not UTF-8
    ],
)
async def test_a_body_too_deep_or_not_utf8_is_a_clear_400_and_queues_nothing(
    sandbox: Sandbox, http: aiohttp.ClientSession, body: bytes, error: str
) -> None:
    for path in ("/sandbox/say", "/sandbox/tap"):
        async with http.post(path, data=body) as response:
            assert response.status == 400
            answer = await response.json()
        assert answer["ok"] is False
        assert error in answer["error"]
    assert sandbox.pending_updates == 0


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8470", "127.0.0.1.evil.example"])
async def test_a_request_naming_another_host_is_421_and_reads_nothing(
    sandbox: Sandbox, http: aiohttp.ClientSession, host: str
) -> None:
    for path in ("/", "/sandbox/state", "/sandbox/chats/1001/history", "/sandbox/stream"):
        async with http.get(path, headers={"Host": host}) as response:
            assert response.status == 421
            assert "Host" in (await response.json())["description"]
    body = {"user": 1001, "text": "/play"}
    async with http.post("/sandbox/say", json=body, headers={"Host": host}) as response:
        assert response.status == 421
    assert sandbox.pending_updates == 0
    assert sandbox.history(1001) == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "localhost:8470", "[::1]:8470"])
async def test_loopback_names_reach_the_chat_page_and_the_control_api(
    http: aiohttp.ClientSession, host: str
) -> None:
    for path in ("/", "/sandbox/state"):
        async with http.get(path, headers={"Host": host}) as response:
            assert response.status == 200


async def test_the_hosts_in_its_options_are_served_too() -> None:
    async with (
        Sandbox(SandboxOptions(hosts=("Chat.Example.org",))) as sandbox,
        aiohttp.ClientSession(
            headers={"X-Sandbox-Token": sandbox.options.control_token}
        ) as session,
    ):
        for host, status in (("chat.example.org:443", 200), ("example.org", 421)):
            async with session.get(sandbox.url + "/sandbox/state", headers={"Host": host}) as r:
                assert r.status == status


@pytest.mark.parametrize("hosts", ["chat.example.org", ("chat example",), ("chat:x",), ("",)])
def test_options_refuse_hosts_that_are_not_host_names(hosts: object) -> None:
    with pytest.raises(ValueError, match="host"):
        SandboxOptions(hosts=hosts)  # type: ignore[arg-type]


async def test_a_user_who_never_started_the_bot_is_added_through_http(
    http: aiohttp.ClientSession,
) -> None:
    stranger = {"user": 1099, "first_name": "Eve", "has_started": False}
    assert (await call(http, "POST", "/sandbox/users", stranger))[0] == 200
    status, body = await call(http, "GET", "/sandbox/state")
    assert not next(u for u in body["result"]["users"] if u["id"] == 1099)["has_started"]
    for bad in ({**stranger, "has_started": "no"}, {**stranger, "first_name": ""}, {"user": "x"}):
        status, answer = await call(http, "POST", "/sandbox/users", bad)
        assert (status, answer["ok"]) == (400, False), bad

"""The sandbox's HTTP control API and chat page: what a person (or a process-level test) does
through the browser, guarded by the control token (``X-Sandbox-Token`` header or ``?token=``)."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, Protocol

from aiohttp import web

from codemojex.telegram.sandbox.errors import SandboxError
from codemojex.telegram.sandbox.guard import NestedTooDeep, read_json
from codemojex.telegram.sandbox.options import SandboxOptions
from codemojex.telegram.sandbox.state import STATE
from codemojex.telegram.sandbox.stats import SandboxStats


class Controls(Protocol):
    """What the control API asks of the sandbox (the Sandbox itself)."""

    @property
    def options(self) -> SandboxOptions: ...
    @property
    def stats(self) -> SandboxStats: ...
    @property
    def pending_updates(self) -> int: ...
    def say(self, user_id: int, text: str, chat: int | None = None) -> dict[str, Any]: ...
    def tap(self, user_id: int, chat: int, message_id: int, data: str) -> dict[str, Any]: ...
    def history(self, chat: int) -> list[dict[str, Any]]: ...
    def block(self, user_id: int) -> None: ...
    def unblock(self, user_id: int) -> None: ...


SANDBOX = web.AppKey("sandbox", Controls)
_PING = 15.0
"""Seconds between keep-alive comments on an idle event stream."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _refuse(status: int, error: str) -> web.Response:
    return web.json_response({"ok": False, "error": error}, status=status)


def guarded(handler: Handler) -> Handler:
    """Refuse (403) a request without the right control token; a SandboxError becomes a 400."""

    async def check(request: web.Request) -> web.StreamResponse:
        expected = request.app[SANDBOX].options.control_token.encode()
        given = request.headers.get("X-Sandbox-Token") or request.query.get("token") or ""
        if not hmac.compare_digest(given.encode(), expected):
            return _refuse(403, "a valid control token is required (X-Sandbox-Token or ?token=)")
        try:
            return await handler(request)
        except SandboxError as error:
            return _refuse(400, str(error))

    return check


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await read_json(request)
    except NestedTooDeep:
        raise SandboxError(
            "the body must be a JSON object (this one is nested too deep to parse)", reason="body"
        ) from None
    except ValueError:
        raise SandboxError("the body must be a JSON object", reason="body") from None
    if not isinstance(body, dict):
        raise SandboxError("the body must be a JSON object", reason="body")
    return body


def _optional_integer(body: dict[str, Any], name: str) -> int | None:
    return None if body.get(name) is None else _integer(body, name)


def _integer(body: dict[str, Any], name: str) -> int:
    value = body.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise SandboxError(f"{name!r} must be an integer, got {value!r}", reason=name)
    return value


def _path_integer(request: web.Request, name: str) -> int:
    raw = request.match_info[name]
    try:
        return int(raw)
    except ValueError:
        raise SandboxError(f"{name!r} must be an integer, got {raw!r}", reason=name) from None


def _string(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise SandboxError(f"{name!r} must be a non-empty string", reason=name)
    return value


@guarded
async def page(request: web.Request) -> web.StreamResponse:
    html = resources.files("codemojex.telegram.sandbox").joinpath("static/chat.html")
    return web.Response(
        text=html.read_text(encoding="utf-8"),
        content_type="text/html",
        headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
    )


@guarded
async def state(request: web.Request) -> web.StreamResponse:
    sandbox = request.app[SANDBOX]
    inner = request.app[STATE]
    users = [
        {"id": u.id, "first_name": u.first_name, "is_blocked": u.id in inner.blocked}
        for u in inner.world.users.values()
    ]
    chats = [
        {"id": c.id, "type": c.kind, "title": c.title, "members": sorted(c.members)}
        for c in inner.world.chats.values()
    ]
    return _ok(
        {
            "bot": inner.bot,
            "palette": list(inner.options.palette),
            "users": users,
            "chats": chats,
            "webhook": bool(inner.webhook.url),
            "pending_updates": sandbox.pending_updates,
        }
    )


@guarded
async def say(request: web.Request) -> web.StreamResponse:
    body = await _body(request)
    user = _integer(body, "user")
    chat = _optional_integer(body, "chat")
    return _ok(request.app[SANDBOX].say(user, _string(body, "text"), chat))


@guarded
async def tap(request: web.Request) -> web.StreamResponse:
    body = await _body(request)
    user, chat, message_id = (_integer(body, name) for name in ("user", "chat", "message_id"))
    return _ok(request.app[SANDBOX].tap(user, chat, message_id, _string(body, "data")))


@guarded
async def history(request: web.Request) -> web.StreamResponse:
    chat = _path_integer(request, "chat")
    if chat not in request.app[STATE].world.chats:
        return _refuse(404, f"no chat {chat}")
    return _ok(request.app[SANDBOX].history(chat))


@guarded
async def block(request: web.Request) -> web.StreamResponse:
    user = _path_integer(request, "user")
    if request.match_info["verb"] == "block":
        request.app[SANDBOX].block(user)
    else:
        request.app[SANDBOX].unblock(user)
    return _ok(True)


@guarded
async def stats(request: web.Request) -> web.StreamResponse:
    return _ok(request.app[SANDBOX].stats.to_json())


@guarded
async def stream(request: web.Request) -> web.StreamResponse:
    """Server-sent events: ``message``, ``edit``, ``tap``, ``answer`` and ``stats``."""
    inner = request.app[STATE]
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    queue = inner.feed.subscribe()
    try:
        await response.write(b": connected\n\n")
        await response.write(inner.feed.frame("stats", inner.tally.snapshot().to_json()).encode())
        while True:
            try:
                async with asyncio.timeout(_PING):
                    frame = await queue.get()
            except TimeoutError:
                await response.write(b": ping\n\n")
                continue
            if frame is None:
                break
            await response.write(frame.encode())
    except ConnectionResetError:
        pass  # the page went away
    finally:
        inner.feed.unsubscribe(queue)
    return response


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", page)
    app.router.add_get("/sandbox/state", state)
    app.router.add_post("/sandbox/say", say)
    app.router.add_post("/sandbox/tap", tap)
    app.router.add_get("/sandbox/chats/{chat}/history", history)
    app.router.add_post("/sandbox/users/{user}/{verb:block|unblock}", block)
    app.router.add_get("/sandbox/stats", stats)
    app.router.add_get("/sandbox/stream", stream)

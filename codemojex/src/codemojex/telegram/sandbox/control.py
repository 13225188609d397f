"""The sandbox's HTTP control API and chat page: what a person (or a process-level test) does
through the browser, guarded by the control token (``X-Sandbox-Token`` header or ``?token=``).

The API answers a wrong token with a JSON 403; the page itself answers it with a 403 that a
person can read (what happened, where the current link is), since that is who opens it: a tab
left open across a restart with a new token reloads itself onto that page. The page's script,
style sheet and icon hold no secret and are served without the token."""

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
from codemojex.telegram.sandbox.world import User


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
    def add_user(self, user_id: int, first_name: str, *, has_started: bool = True) -> User: ...
    def block(self, user_id: int) -> None: ...
    def unblock(self, user_id: int) -> None: ...


SANDBOX = web.AppKey("sandbox", Controls)
_PING = 15.0
"""Seconds between keep-alive comments on an idle event stream."""
_RETRY_MS = 1000
"""How soon a page whose event stream broke reconnects (the browser's default is 3 s; a
sandbox restarted on the same port is back sooner than that)."""
_ASSETS = {
    "chat.css": "text/css",
    "chat.js": "text/javascript",
    "favicon.svg": "image/svg+xml",
}
"""The page's files served without the token: the only names ``/static/`` answers."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _refuse(status: int, error: str) -> web.Response:
    return web.json_response({"ok": False, "error": error}, status=status)


def _given_token(request: web.Request) -> str:
    return request.headers.get("X-Sandbox-Token") or request.query.get("token") or ""


def _has_token(request: web.Request) -> bool:
    expected = request.app[SANDBOX].options.control_token.encode()
    return hmac.compare_digest(_given_token(request).encode(), expected)


def guarded(handler: Handler) -> Handler:
    """Refuse (403) a request without the right control token; a SandboxError becomes a 400."""

    async def check(request: web.Request) -> web.StreamResponse:
        if not _has_token(request):
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


def _static(name: str) -> str:
    return (
        resources.files("codemojex.telegram.sandbox")
        .joinpath(f"static/{name}")
        .read_text(encoding="utf-8")
    )


_PAGE_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


async def page(request: web.Request) -> web.StreamResponse:
    """The chat page; without the right token, a page that says why and where the link is."""
    if _has_token(request):
        return web.Response(
            text=_static("chat.html"), content_type="text/html", headers=_PAGE_HEADERS
        )
    if _given_token(request):
        what = (
            "This link's token is not the one this sandbox accepts: the sandbox was started "
            "afresh since the link was made (on a new data directory, or with another "
            "CODEMOJEX_SANDBOX_TOKEN), or the link was copied wrong."
        )
    else:
        what = "This link has no token: the chat page's address ends in <code>/?token=…</code>."
    text = _static("stale.html").replace("{what}", what)
    return web.Response(status=403, text=text, content_type="text/html", headers=_PAGE_HEADERS)


async def asset(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    kind = _ASSETS.get(name)
    if kind is None:
        raise web.HTTPNotFound()
    # Revalidated each load (cheap on loopback): a page never runs yesterday's script.
    return web.Response(
        text=_static(name), content_type=kind, headers={"Cache-Control": "no-cache"}
    )


async def favicon(request: web.Request) -> web.StreamResponse:
    """Browsers ask for /favicon.ico whatever the page links; answer with the page's icon."""
    raise web.HTTPFound("/static/favicon.svg")


@guarded
async def state(request: web.Request) -> web.StreamResponse:
    sandbox = request.app[SANDBOX]
    inner = request.app[STATE]
    users = [
        {
            "id": u.id,
            "first_name": u.first_name,
            "is_blocked": u.id in inner.blocked,
            "has_started": u.id not in inner.world.strangers,
        }
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
async def add_user(request: web.Request) -> web.StreamResponse:
    """Add (or rename) a user: ``{"user": id, "first_name": …, "has_started": bool}``;
    ``has_started: false`` makes one who never opened the bot (private sends answer 403)."""
    body = await _body(request)
    user = _integer(body, "user")
    has_started = body.get("has_started", True)
    if not isinstance(has_started, bool):
        raise SandboxError(
            f"'has_started' must be true or false, got {has_started!r}", reason="has_started"
        )
    added = request.app[SANDBOX].add_user(
        user, _string(body, "first_name"), has_started=has_started
    )
    return _ok({"id": added.id, "first_name": added.first_name, "has_started": has_started})


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
        await response.write(f": connected\nretry: {_RETRY_MS}\n\n".encode())
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
    app.router.add_get("/favicon.ico", favicon)
    app.router.add_get("/static/{name}", asset)
    app.router.add_get("/sandbox/state", state)
    app.router.add_post("/sandbox/say", say)
    app.router.add_post("/sandbox/tap", tap)
    app.router.add_get("/sandbox/chats/{chat}/history", history)
    app.router.add_post("/sandbox/users", add_user)
    app.router.add_post("/sandbox/users/{user}/{verb:block|unblock}", block)
    app.router.add_get("/sandbox/stats", stats)
    app.router.add_get("/sandbox/stream", stream)

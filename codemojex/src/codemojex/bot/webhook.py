"""The webhook gateway: an aiohttp route that takes the updates Telegram POSTs, checks the
``X-Telegram-Bot-Api-Secret-Token`` header and admits each update onto ``cm.bot.commands``
exactly as the poller does; ``setWebhook`` at start, ``deleteWebhook`` at stop.

A request without the right secret gets 401 and admits nothing. A body that is not an update
(malformed or too deeply nested JSON included) is logged in one line and dropped with 200
(Telegram would otherwise retry it forever); a bus failure answers 503, so Telegram delivers the
update again later and nothing is lost. There is no ``Host`` check: Telegram calls the public
name, which a proxy may rewrite; the secret token is what guards the route.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
from dataclasses import dataclass, field
from typing import Any, Final

from aiogram import Bot
from aiohttp import web

from codemojex.bot.api import AdmissionError, admit
from codemojex.bot.gateway import ALLOWED_UPDATES
from echomq import EchoMQError, Task

log = logging.getLogger("codemojex.gateway")

SECRET_HEADER: Final = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 (a header name)
"""The header Telegram sends the webhook's secret token in."""


def new_secret() -> str:
    """A fresh secret token: 43 characters of ``A-Za-z0-9_-``, as Telegram allows."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class WebhookOptions:
    """Where the webhook listens (``host``, ``port`` — 0 picks a free one — and ``path``) and
    the ``public_url`` Telegram posts to (``None``: this server's own address, for a local Bot
    API such as the sandbox). ``secret`` is the token every POST must carry."""

    secret: str = field(default_factory=new_secret, repr=False)
    host: str = "127.0.0.1"
    port: int = 0
    path: str = "/telegram/webhook"
    public_url: str | None = None
    drop_pending_updates: bool = False

    def __post_init__(self) -> None:
        if not self.secret or not all(
            c.isascii() and (c.isalnum() or c in "_-") for c in self.secret
        ):
            raise ValueError("the webhook secret is 1-256 characters of A-Za-z0-9_-")
        if len(self.secret) > 256 or not self.path.startswith("/"):
            raise ValueError("the webhook secret is at most 256 characters; the path starts with /")


def is_authorised(given: str | None, secret: str) -> bool:
    """Whether ``given`` (the header's value) is ``secret``, compared in constant time."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), secret.encode("utf-8"))


class WebhookGateway:
    """Serves the webhook route for ``bot`` and admits ``command`` tasks; ``async with`` it, or
    :meth:`start` and :meth:`stop`. Counts ``enqueued``, ``duplicate``, ``dropped``, ``refused``.
    """

    def __init__(
        self, bot: Bot, command: Task[..., Any], options: WebhookOptions | None = None
    ) -> None:
        self.bot = bot
        self.command = command
        self.options = options or WebhookOptions()
        self.enqueued = 0
        self.duplicate = 0
        self.dropped = 0
        self.refused = 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    def application(self) -> web.Application:
        """The aiohttp application with the one webhook route."""
        app = web.Application()
        app.router.add_post(self.options.path, self._receive)
        return app

    async def start(self) -> None:
        """Listen, then ``setWebhook`` (so no update arrives before the route is up)."""
        runner = web.AppRunner(self.application(), access_log=None)
        await runner.setup()
        self._runner = runner
        try:
            site = web.TCPSite(runner, self.options.host, self.options.port)
            await site.start()
            host, port = runner.addresses[0][:2]
            self.url = self.options.public_url or f"http://{host}:{port}{self.options.path}"
            await self.bot.set_webhook(
                self.url,
                secret_token=self.options.secret,
                allowed_updates=list(ALLOWED_UPDATES),
                drop_pending_updates=self.options.drop_pending_updates,
            )
        except BaseException:
            await self.stop(delete=False)
            raise
        log.info("webhook set; listening on %s:%s%s", host, port, self.options.path)

    async def stop(self, *, delete: bool = True) -> None:
        """``deleteWebhook`` (so polling works again) and stop listening."""
        try:
            if delete:
                await self.bot.delete_webhook()
        finally:
            if self._runner is not None:
                runner, self._runner = self._runner, None
                await runner.cleanup()

    async def __aenter__(self) -> WebhookGateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _receive(self, request: web.Request) -> web.Response:
        if not is_authorised(request.headers.get(SECRET_HEADER), self.options.secret):
            self.refused += 1
            log.warning("webhook: refused a POST without the right secret token")
            return web.json_response({"ok": False, "description": "Unauthorized"}, status=401)
        try:
            update = json.loads(await request.read())
        except (ValueError, RecursionError) as error:
            # Not an update, so 200 and dropped (a retry would bring the same bytes back).
            # RecursionError: a document like "[[[[…" nested deeper than the parser goes;
            # UnicodeDecodeError is a ValueError. One line, the kind only: no body, no secret.
            self.dropped += 1
            log.warning("webhook: dropped a body that is not JSON: %s", type(error).__name__)
            return web.json_response({"ok": True})
        try:
            admitted = await admit(self.command, [update])
        except (AdmissionError, EchoMQError) as error:
            log.warning("webhook: the bus did not take an update (Telegram retries): %s", error)
            return web.json_response({"ok": False, "description": "try again"}, status=503)
        self.enqueued += admitted.enqueued
        self.duplicate += admitted.duplicate
        self.dropped += admitted.dropped
        return web.json_response({"ok": True})

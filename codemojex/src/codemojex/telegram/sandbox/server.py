"""The :class:`Sandbox`: a local Bot API server with Telegram's envelopes and limits, and the
Python control surface tests and demos drive it with (users write and tap; faults, blocks and
429s are injected; the bot's messages and the counters are read back)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import secrets
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

from aiohttp import web

from codemojex.telegram.sandbox import bot_api, control
from codemojex.telegram.sandbox.archive import Archive, keep_forever
from codemojex.telegram.sandbox.errors import SandboxError
from codemojex.telegram.sandbox.guard import host_check
from codemojex.telegram.sandbox.options import Faults, SandboxOptions
from codemojex.telegram.sandbox.state import STATE, CallbackQuery, State
from codemojex.telegram.sandbox.stats import SandboxStats
from codemojex.telegram.sandbox.webhook import deliver_forever
from codemojex.telegram.sandbox.world import Chat, SentMessage, User
from echomq.dashboard import Hosts

PREDEFINED_USERS = ((1001, "Ada"), (1002, "Bob"), (1003, "Cy"), (1004, "Dee"))
LOUNGE = -1001
"""The predefined group chat, "Codemojex lounge", with every predefined user."""


class Sandbox:
    """A sandbox Bot API server; ``async with Sandbox(options) as sandbox:`` starts and stops it.

    Every method but start/stop/wait_for_messages is synchronous and takes effect at once; bad
    input raises :class:`~codemojex.telegram.sandbox.errors.SandboxError`. With
    ``options.data_dir`` the sandbox comes back as it was: the world and the control token are
    read here (a file it cannot use is a SandboxError) and kept there while it runs.
    """

    def __init__(self, options: SandboxOptions | None = None) -> None:
        options = options or SandboxOptions()
        self._archive = None if options.data_dir is None else Archive(options.data_dir)
        if not options.control_token:
            token = self._archive.control_token() if self._archive else secrets.token_urlsafe(18)
            options = dataclasses.replace(options, control_token=token)
        self.options = options
        self._state = State(self.options)
        self._query_ids = itertools.count(4_000_000_000_000_000_001)
        self._runner: web.AppRunner | None = None
        self._webhook: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self._url = ""
        for user_id, name in PREDEFINED_USERS:
            self.add_user(user_id, name)
        self.add_group(LOUNGE, "Codemojex lounge", [user_id for user_id, _ in PREDEFINED_USERS])
        if self._archive is not None:
            self._archive.load(self._state)
        # What the files hold: any change from here on (before start too) is written out.
        self._kept = self._state.world.revision

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        if self._runner is not None or self._state.is_closing:
            raise RuntimeError("a Sandbox starts once")
        # Every route, the Bot API included: a rebinding page could otherwise drive the bot too.
        hosts = Hosts([name for name in (self.options.host, *self.options.hosts) if name])
        app = web.Application(middlewares=[host_check(hosts)])
        app[STATE] = self._state
        app[control.SANDBOX] = self
        bot_api.add_routes(app)
        control.add_routes(app)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, self.options.host, self.options.port)
        await site.start()
        host, port = runner.addresses[0][:2]
        self._url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self._webhook = asyncio.create_task(deliver_forever(self._state), name="sandbox-webhook")
        if self._archive is not None:
            self._keeper = asyncio.create_task(
                keep_forever(self._state, self._archive, self._kept, self._stopped),
                name="sandbox-archive",
            )

    async def stop(self) -> None:
        """End long polls and event streams at once, stop webhook delivery, close the server;
        with a data directory, then write the world's last changes out."""
        state = self._state
        state.is_closing = True
        state.updates.wake.notify()
        state.world.wake.notify()
        state.feed.close()
        if self._webhook is not None:
            self._webhook.cancel()
            await asyncio.gather(self._webhook, return_exceptions=True)
            self._webhook = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._keeper is not None:
            self._stopped.set()
            state.world.wake.notify()
            await self._keeper  # it writes what is new and returns
            self._keeper = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        """The API base, ``http://127.0.0.1:PORT`` (give it to ``TelegramConfig(base=…)``)."""
        if not self._url:
            raise RuntimeError("the sandbox is not started")
        return self._url

    @property
    def chat_page_url(self) -> str:
        return f"{self.url}/?token={quote(self.options.control_token)}"

    # -- the people ----------------------------------------------------------------------------

    def add_user(self, user_id: int, first_name: str, *, has_started: bool = True) -> User:
        """Add (or rename) a user; ``has_started=False`` makes one who never opened the bot:
        private sends to them answer 403 (``bot can't initiate conversation with a user``)
        until they write to the bot in their private chat, as on Telegram."""
        return self._state.world.add_user(user_id, first_name, has_started=has_started)

    def add_group(self, chat_id: int, title: str, members: list[int]) -> Chat:
        return self._state.world.add_group(chat_id, title, members)

    def say(self, user_id: int, text: str, chat: int | None = None) -> dict[str, Any]:
        """``user_id`` writes ``text`` in ``chat`` (None: their private chat); returns the Update
        queued for the bot."""
        if not isinstance(text, str) or not text.strip():
            raise SandboxError("text must be a non-empty string", reason="text")
        if len(text) > 4096:
            raise SandboxError("text is longer than 4096 characters", reason="text")
        world = self._state.world
        user = world.user(user_id)
        message = world.write(user, world.chat_for(user, chat), text)
        return self._queue({"message": message})

    def tap(self, user_id: int, chat: int, message_id: int, data: str) -> dict[str, Any]:
        """``user_id`` taps a button with ``data`` on the bot's message ``message_id`` in ``chat``;
        returns the callback_query Update queued for the bot."""
        if not isinstance(data, str) or not 1 <= len(data.encode()) <= 64:
            raise SandboxError("callback data must be 1 to 64 bytes of text", reason="data")
        world = self._state.world
        user = world.user(user_id)
        room = world.chat_for(user, chat)
        message = world.find(room.id, message_id)
        if message is None or message["from"]["id"] != self._state.bot["id"]:
            raise SandboxError(
                f"no bot message {message_id} in chat {room.id} to tap", reason="message"
            )
        query_id = str(next(self._query_ids))
        self._state.callbacks[query_id] = CallbackQuery(user.id, room.id, message_id)
        query = {
            "id": query_id,
            "from": user.to_api(),
            "message": dict(message),
            "chat_instance": str(abs(room.id) * 1_000_003 + 17),
            "data": data,
        }
        self._state.feed.publish("tap", {"chat": room.id, "user": user.id, "data": data})
        return self._queue({"callback_query": query})

    def _queue(self, body: dict[str, Any]) -> dict[str, Any]:
        update = {"update_id": self._state.updates.next_id(), **body}
        self._state.updates.push(update)
        return update

    def push_raw(self, obj: Any) -> None:
        """Queue ``obj`` for the bot exactly as given, malformed or not."""
        self._state.updates.push(obj)

    def replay(self, update_id: int) -> Any:
        """Hand an already queued update to the bot once more (as a poll retry would)."""
        update = self._state.updates.replay(update_id)
        if update is None:
            raise SandboxError(f"no update {update_id} was ever queued", reason="update")
        return update

    def block(self, user_id: int) -> None:
        """From now on, sends to ``user_id``'s private chat answer 403."""
        self._state.world.user(user_id)
        self._state.blocked.add(user_id)
        self._state.world.touch()

    def unblock(self, user_id: int) -> None:
        self._state.blocked.discard(user_id)
        self._state.world.touch()

    # -- limits and faults ---------------------------------------------------------------------

    def force_429(self, chat: int, retry_after: int = 2) -> None:
        """The next send to ``chat`` answers 429 with ``retry_after``; sends before that many
        seconds have passed are refused too."""
        if not isinstance(retry_after, int) or retry_after < 1:
            raise SandboxError("retry_after must be a whole number of seconds >= 1", reason="retry")
        self._state.limiter.force(chat, retry_after)

    def set_faults(self, faults: Faults) -> None:
        self._state.set_faults(faults)

    # -- reading back --------------------------------------------------------------------------

    def messages(self, chat: int) -> list[SentMessage]:
        """The bot's messages to ``chat``, in order (latest text after edits)."""
        return self._state.world.messages(chat)

    def history(self, chat: int) -> list[dict[str, Any]]:
        """The whole conversation in ``chat`` as Bot API Message objects, in order."""
        return self._state.world.history(chat)

    async def wait_for_messages(
        self, chat: int, n: int, timeout: float = 10.0
    ) -> list[SentMessage]:
        """Wait until the bot has sent ``n`` messages to ``chat``; TimeoutError otherwise."""
        world = self._state.world
        async with asyncio.timeout(timeout):
            while len(world.messages(chat)) < n:
                if self._state.is_closing:
                    raise RuntimeError("the sandbox stopped")
                await world.wake.wait(timeout)
        return world.messages(chat)

    @property
    def poll_generation(self) -> int:
        """How many getUpdates calls have reached the sandbox."""
        return self._state.poll_generation

    async def wait_for_poll(self, generation: int, timeout: float = 10.0) -> None:
        """Wait until getUpdates call number ``generation`` has reached the sandbox; a long
        poll that found nothing pending is waiting there from then on. TimeoutError otherwise.
        """
        state = self._state
        async with asyncio.timeout(timeout):
            while state.poll_generation < generation:
                if state.is_closing:
                    raise RuntimeError("the sandbox stopped")
                await state.polled.wait(timeout)

    @property
    def stats(self) -> SandboxStats:
        return self._state.tally.snapshot()

    @property
    def pending_updates(self) -> int:
        """Updates queued for the bot and not yet confirmed (or taken by the webhook)."""
        return len(self._state.updates)

"""Webhook delivery: while the bot has a webhook set, POST each pending update to it in order
with the ``X-Telegram-Bot-Api-Secret-Token`` header, retrying a refusal with a short backoff."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from codemojex.telegram.sandbox.state import State

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 (a header name)
_FIRST_BACKOFF = 0.05
_MAX_BACKOFF = 1.0
_IDLE = 30.0
"""Seconds an idle delivery loop waits before looking again (a wake cuts it short)."""


async def deliver_forever(state: State) -> None:
    """Run until cancelled (the sandbox stops); one update in flight at a time, as ordered."""
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        backoff = _FIRST_BACKOFF
        while not state.is_closing:
            pending = state.updates.first() if state.webhook.url else None
            if pending is None:
                await state.updates.wake.wait(_IDLE)
                continue
            headers = {SECRET_HEADER: state.webhook.secret} if state.webhook.secret else {}
            try:
                async with session.post(
                    state.webhook.url, json=pending.update, headers=headers
                ) as response:
                    await response.read()
                    error = (
                        None
                        if 200 <= response.status < 300
                        else f"Wrong response from the webhook: {response.status} {response.reason}"
                    )
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = f"Connection failed: {type(exc).__name__}"
            if error is None:
                state.updates.done(pending)
                backoff = _FIRST_BACKOFF
                continue
            state.webhook.last_error_date = int(time.time())
            state.webhook.last_error_message = error
            # Back off before the same update again: a refusing bot is not hammered.
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)

"""The bot stage's producer API: admitting Telegram updates as ``command`` tasks on
``cm.bot.commands`` (each batch in one ``enqueue_many``, a lane per chat, deduplicated by
``update_id``); the task is registered in :mod:`codemojex.bot.tasks`. Both gateways (long
polling and the webhook) admit through here; nothing is handled inline.

A malformed update (not an object, no integer ``update_id``) is logged without its content and
dropped; it never stops the gateway.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from codemojex.domain import CodemojexError
from echomq import Call, InvalidArgument, Task

log = logging.getLogger("codemojex.gateway")

NO_CHAT_LANE: Final = "_"
"""The lane of an update that names no chat (an inline query, a poll answer)."""


class AdmissionError(CodemojexError):
    """The bus did not take part of a batch (``failed`` updates); nothing was confirmed, so the
    same batch is admitted again (deduplicated) on the next try."""

    def __init__(self, failed: int, detail: str) -> None:
        self.failed = failed
        super().__init__(f"{failed} update(s) not admitted: {detail}", reason="not_admitted")


@dataclass(frozen=True, slots=True)
class Admitted:
    """What one batch came to: ``next_offset`` confirms every update of it (``None`` when the
    batch held no readable ``update_id``)."""

    enqueued: int
    duplicate: int
    dropped: int
    next_offset: int | None


def update_dedup_key(update_id: int) -> str:
    """The dedup key of an update on ``cm.bot.commands``."""
    return f"update:{update_id}"


def update_chat(update: dict[str, Any]) -> int | None:
    """The chat an update belongs to (its lane), or ``None`` when it names none."""
    for field in ("message", "edited_message", "channel_post", "edited_channel_post"):
        chat = _chat_id(update.get(field))
        if chat is not None:
            return chat
    callback = update.get("callback_query")
    if isinstance(callback, dict):
        chat = _chat_id(callback.get("message"))
        if chat is not None:
            return chat
        sender = callback.get("from")
        if isinstance(sender, dict) and _is_int(sender.get("id")):
            return int(sender["id"])  # a button under an inline message: the user's own chat
    for field in ("my_chat_member", "chat_member", "chat_join_request"):
        value = update.get(field)
        if isinstance(value, dict):
            chat = _chat_id(value)
            if chat is not None:
                return chat
    return None


def _chat_id(holder: object) -> int | None:
    if not isinstance(holder, dict):
        return None
    chat = holder.get("chat")
    if isinstance(chat, dict) and _is_int(chat.get("id")):
        return int(chat["id"])
    return None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def update_id_of(update: object) -> int | None:
    """The ``update_id`` of a well-formed update, or ``None``."""
    if isinstance(update, dict) and _is_int(update.get("update_id")):
        return int(update["update_id"])
    return None


def _describe(update: object) -> str:
    # The shape only, never the content: user text and ids are not for the log.
    if isinstance(update, dict):
        return f"an object with keys {sorted(str(key) for key in update)[:8]}"
    return f"a {type(update).__name__}"


async def admit(command: Task[..., Any], updates: Sequence[object]) -> Admitted:
    """Admit ``updates`` (as the Bot API delivered them) as ``command`` tasks, in one
    ``enqueue_many``.

    Raises :class:`AdmissionError` (or the bus's :class:`~echomq.EchoMQError`) when any
    well-formed update was not admitted: the caller must not confirm the batch, and may admit it
    again later (the dedup key makes that idempotent while the first copy waits).
    """
    calls: list[Call[Any]] = []
    ids: list[int] = []
    dropped = 0
    for position, update in enumerate(updates):
        update_id = update_id_of(update)
        if update_id is None:
            dropped += 1
            log.warning(
                "dropped a malformed update at position %d: %s", position, _describe(update)
            )
            continue
        assert isinstance(update, dict)
        chat = update_chat(update)
        lane = NO_CHAT_LANE if chat is None else str(chat)
        calls.append(command.using(lane=lane, dedup_key=update_dedup_key(update_id)).call(update))
        ids.append(update_id)
    handles = await command.app.enqueue_many(calls) if calls else []
    verdicts = [handle.verdict for handle in handles]
    enqueued = duplicate = failed = 0
    problem = ""
    for update_id, verdict in zip(ids, verdicts, strict=True):
        if verdict.kind in ("enqueued", "scheduled"):
            enqueued += 1
        elif verdict.kind == "duplicate":
            duplicate += 1
        elif isinstance(verdict.error, InvalidArgument):
            # The update itself cannot ride the bus (e.g. not JSON-encodable): drop it alone.
            dropped += 1
            log.warning("dropped update %d: %s", update_id, verdict.error)
        else:
            failed += 1
            problem = str(verdict.error)
    if failed:
        raise AdmissionError(failed, problem)
    next_offset = max(ids) + 1 if ids else None
    return Admitted(enqueued, duplicate, dropped, next_offset)

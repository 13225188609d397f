"""The Bot API methods the sandbox serves, each answering what Telegram answers (the result, or a
:class:`BotApiError` worded as Telegram words it)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from codemojex.telegram.sandbox.errors import BotApiError, bad_request
from codemojex.telegram.sandbox.params import Params
from codemojex.telegram.sandbox.state import State
from codemojex.telegram.sandbox.world import Chat

MAX_TEXT = 4096
CONFLICT_WEBHOOK = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)
CONFLICT_POLL = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)
CANNOT_INITIATE = "Forbidden: bot can't initiate conversation with a user"
"""Telegram's 403 to a private send to a user who never started the bot."""
_PARSE_MODES = frozenset({"HTML", "Markdown", "MarkdownV2"})
_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
_KEYBOARDS = ("inline_keyboard", "keyboard", "remove_keyboard", "force_reply")

Method = Callable[[State, Params], Awaitable[Any]]


def _chat(state: State, params: Params) -> Chat:
    if not params.has("chat_id"):
        raise bad_request("chat_id is empty")
    try:
        chat_id = params.integer("chat_id")
    except BotApiError:
        chat_id = None  # "@channelname": the sandbox has no public usernames
    chat = state.world.chats.get(chat_id) if chat_id is not None else None
    if chat is None:
        raise bad_request("chat not found")
    return chat


def _text(params: Params) -> str:
    text = params.text("text") or ""
    if not text.strip():
        raise bad_request("message text is empty")
    if len(text) > MAX_TEXT:
        raise bad_request("message is too long")
    return text


def _parse_mode(params: Params) -> str | None:
    mode = params.text("parse_mode") or None
    if mode is not None and mode not in _PARSE_MODES:
        raise bad_request(f"unsupported parse_mode {mode!r}")
    return mode


def _markup(params: Params) -> dict[str, Any] | None:
    markup = params.obj("reply_markup")
    if markup is None:
        return None
    if not isinstance(markup, dict) or not any(key in markup for key in _KEYBOARDS):
        raise bad_request("can't parse reply keyboard markup JSON object")
    rows = markup.get("inline_keyboard")
    if rows is None:
        return markup
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise bad_request("can't parse inline keyboard markup JSON object")
    for row in rows:
        for button in row:
            if not isinstance(button, dict) or not isinstance(button.get("text"), str):
                raise bad_request("can't parse inline keyboard button: text is required")
            data = button.get("callback_data")
            if data is not None and not (1 <= len(str(data).encode()) <= 64):
                raise bad_request("BUTTON_DATA_INVALID")
    return markup


def _reply_to(state: State, params: Params, chat: Chat) -> dict[str, Any] | None:
    """The message a send replies to (``reply_parameters`` or the older
    ``reply_to_message_id``); a missing one is a 400 unless ``allow_sending_without_reply``."""
    reply = params.obj("reply_parameters")
    if reply is not None and not isinstance(reply, dict):
        raise bad_request("can't parse reply parameters JSON object")
    message_id = reply.get("message_id") if reply else params.integer("reply_to_message_id")
    if message_id is None:
        return None
    if not isinstance(message_id, int) or isinstance(message_id, bool):
        raise bad_request("message to be replied not found")
    found = state.world.find(chat.id, message_id)
    without = (reply or {}).get("allow_sending_without_reply") or params.flag(
        "allow_sending_without_reply"
    )
    if found is None and not without:
        raise bad_request("message to be replied not found")
    return found


def _admit(state: State, chat: Chat) -> None:
    """A send may go to ``chat``: not blocked, within every limit (its tokens are taken)."""
    if chat.kind == "private" and chat.id in state.blocked:
        raise BotApiError(403, "Forbidden: bot was blocked by the user")
    if chat.kind == "private" and chat.id in state.world.strangers:
        raise BotApiError(403, CANNOT_INITIATE)
    retry_after = state.limiter.verdict(chat.id)
    if retry_after is not None:
        raise BotApiError(
            429, f"Too Many Requests: retry after {retry_after}", retry_after=retry_after
        )


async def get_me(state: State, params: Params) -> Any:
    return {
        **state.bot,
        "can_join_groups": True,
        "can_read_all_group_messages": False,
        "supports_inline_queries": False,
    }


async def get_updates(state: State, params: Params) -> Any:
    if state.webhook.url:
        raise BotApiError(409, CONFLICT_WEBHOOK)
    offset = params.integer("offset")
    limit = min(max(params.integer("limit", 100) or 100, 1), 100)
    timeout = max(params.integer("timeout", 0) or 0, 0)
    if offset is not None:
        state.updates.confirm(offset)
    state.poll_generation += 1
    generation = state.poll_generation
    state.updates.wake.notify()  # an older long poll still waiting ends with a 409
    state.polled.notify()
    deadline = state.clock() + timeout
    while not len(state.updates) and not state.is_closing and not state.webhook.url:
        if state.poll_generation != generation:
            raise BotApiError(409, CONFLICT_POLL)
        left = deadline - state.clock()
        if left <= 0:
            break
        await state.updates.wake.wait(left)
    if state.poll_generation != generation:
        raise BotApiError(409, CONFLICT_POLL)
    if state.webhook.url or state.is_closing:
        return []
    return state.updates.take(limit)


async def set_webhook(state: State, params: Params) -> Any:
    url = params.text("url") or ""
    if not url:
        return await delete_webhook(state, params)
    if not url.startswith(("http://", "https://")):
        raise bad_request("bad webhook: An HTTPS URL must be provided for webhook")
    secret = params.text("secret_token") or None
    if secret is not None and not _SECRET.fullmatch(secret):
        raise bad_request("secret token contains unallowed characters")
    if params.flag("drop_pending_updates"):
        state.updates.drop_all()
    state.webhook.url = url
    state.webhook.secret = secret
    state.webhook.last_error_date = state.webhook.last_error_message = None
    state.updates.wake.notify()
    return True


async def delete_webhook(state: State, params: Params) -> Any:
    if params.flag("drop_pending_updates"):
        state.updates.drop_all()
    state.webhook.url = ""
    state.webhook.secret = None
    state.updates.wake.notify()
    return True


async def get_webhook_info(state: State, params: Params) -> Any:
    info: dict[str, Any] = {
        "url": state.webhook.url,
        "has_custom_certificate": False,
        "pending_update_count": len(state.updates),
    }
    if state.webhook.url:
        info["max_connections"] = 1
    if state.webhook.last_error_date is not None:
        info["last_error_date"] = state.webhook.last_error_date
        info["last_error_message"] = state.webhook.last_error_message
    return info


async def send_message(state: State, params: Params) -> Any:
    chat = _chat(state, params)
    text = _text(params)
    parse_mode = _parse_mode(params)
    markup = _markup(params)
    reply_to = _reply_to(state, params, chat)
    _admit(state, chat)
    message = state.world.send(chat, text, markup, parse_mode, state.clock(), reply_to=reply_to)
    state.tally.delivered(chat.id)
    return message


async def edit_message_text(state: State, params: Params) -> Any:
    if params.has("inline_message_id"):
        raise bad_request("inline messages are not supported by the sandbox")
    chat = _chat(state, params)
    message_id = params.integer("message_id")
    if message_id is None:
        raise bad_request("message identifier is not specified")
    text = _text(params)
    _parse_mode(params)
    markup = _markup(params)
    message = state.world.find(chat.id, message_id)
    if message is None:
        raise bad_request("message to edit not found")
    if message["from"]["id"] != state.bot["id"]:
        raise bad_request("message can't be edited")
    if message["text"] == text and message.get("reply_markup") == markup:
        raise bad_request(
            "message is not modified: specified new message content and reply markup are "
            "exactly the same as a current content and reply markup of the message"
        )
    _admit(state, chat)
    state.tally.bump("edited")
    return state.world.edit(message, text, markup)


async def answer_callback_query(state: State, params: Params) -> Any:
    query_id = params.text("callback_query_id") or ""
    query = state.callbacks.get(query_id)
    if query is None or query.is_answered:
        raise bad_request("query is too old and response timeout expired or query ID is invalid")
    query.is_answered = True
    state.feed.publish(
        "answer",
        {
            "callback_query_id": query_id,
            "chat": query.chat,
            "user": query.user,
            "message_id": query.message_id,
            "text": params.text("text") or "",
            "show_alert": params.flag("show_alert"),
        },
    )
    return True


async def set_my_commands(state: State, params: Params) -> Any:
    commands = params.obj("commands")
    if not isinstance(commands, list):
        raise bad_request("can't parse commands JSON object")
    state.commands = [c for c in commands if isinstance(c, dict)]
    return True


async def get_my_commands(state: State, params: Params) -> Any:
    return state.commands


async def delete_my_commands(state: State, params: Params) -> Any:
    state.commands = []
    return True


async def send_chat_action(state: State, params: Params) -> Any:
    _chat(state, params)
    return True


METHODS: dict[str, Method] = {
    "getme": get_me,
    "getupdates": get_updates,
    "setwebhook": set_webhook,
    "deletewebhook": delete_webhook,
    "getwebhookinfo": get_webhook_info,
    "sendmessage": send_message,
    "editmessagetext": edit_message_text,
    "answercallbackquery": answer_callback_query,
    "setmycommands": set_my_commands,
    "getmycommands": get_my_commands,
    "deletemycommands": delete_my_commands,
    "sendchataction": send_chat_action,
}
"""Bot API methods by lower-case name (Telegram's method names are case-insensitive)."""

SENDS = frozenset({"sendmessage", "editmessagetext"})
"""The methods faults and limits apply to."""

"""The sandbox's world: its users, its chats (private ones and groups) and every message in
them, stored as Bot API ``Message`` objects in the order they were written; a snapshot of it is
what a sandbox with a data directory keeps across restarts."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from codemojex.telegram.sandbox.errors import SandboxError
from codemojex.telegram.sandbox.updates import Wake

ChatKind = Literal["private", "group"]

# A /command (optionally /command@botname) standing on its own, as Telegram marks bot_command.
_COMMAND = re.compile(r"(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?")


@dataclass(frozen=True, slots=True)
class User:
    id: int
    first_name: str

    def to_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "is_bot": False,
            "first_name": self.first_name,
            "language_code": "en",
        }


@dataclass(slots=True)
class Chat:
    id: int
    kind: ChatKind
    title: str
    members: set[int] = field(default_factory=set)

    def to_api(self) -> dict[str, Any]:
        if self.kind == "private":
            return {"id": self.id, "type": "private", "first_name": self.title}
        return {"id": self.id, "type": "group", "title": self.title}


@dataclass(frozen=True, slots=True)
class SentMessage:
    """A message the bot sent: ``at`` is the sandbox's monotonic clock at delivery, ``edits``
    how often it was edited since (``text`` and ``reply_markup`` are the latest)."""

    message_id: int
    chat: int
    text: str
    reply_markup: dict[str, Any] | None
    at: float
    edits: int = 0
    parse_mode: str | None = None
    reply_to: int | None = None
    """The message this one replies to (its id in the same chat), if any."""


def utf16_length(text: str) -> int:
    """Telegram measures entity offsets and lengths in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def command_entities(text: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "bot_command",
            "offset": utf16_length(text[: match.start()]),
            "length": utf16_length(match.group()),
        }
        for match in _COMMAND.finditer(text)
    ]


class World:
    """Users, chats and the conversation in each chat; ``on_message(kind, message)`` hears every
    new (``"message"``) and edited (``"edit"``) message. ``revision`` counts the changes worth
    keeping, so whoever keeps the world knows when it has something new to write."""

    def __init__(self, bot: dict[str, Any], on_message: Callable[[str, dict[str, Any]], None]):
        self.bot = bot
        self.users: dict[int, User] = {}
        self.chats: dict[int, Chat] = {}
        self._conversation: dict[int, list[dict[str, Any]]] = {}
        self._sent: dict[int, list[SentMessage]] = {}
        self._last_id: dict[int, int] = {}
        self._on_message = on_message
        #: Users who never started the bot: Telegram refuses the bot's private sends to them
        #: (403) until they write in their private chat with it (``/start``).
        self.strangers: set[int] = set()
        self.wake = Wake()
        self.revision = 0

    def touch(self) -> None:
        """Something worth keeping changed (a user, a chat, a message, a block)."""
        self.revision += 1
        self.wake.notify()

    def add_user(self, user_id: int, first_name: str, *, has_started: bool = True) -> User:
        """A user; ``has_started=False``: one who never opened the bot (a stranger until they
        write in their private chat)."""
        if not isinstance(user_id, int) or isinstance(user_id, bool) or user_id <= 0:
            raise SandboxError(
                f"user id must be a positive integer, got {user_id!r}", reason="user"
            )
        if not first_name:
            raise SandboxError("a user needs a first name", reason="user")
        user = self.users[user_id] = User(user_id, first_name)
        if has_started:
            self.strangers.discard(user_id)
        else:
            self.strangers.add(user_id)
        self.chats.setdefault(user_id, Chat(user_id, "private", first_name, {user_id}))
        self.touch()
        return user

    def add_group(self, chat_id: int, title: str, members: list[int]) -> Chat:
        if not isinstance(chat_id, int) or isinstance(chat_id, bool) or chat_id >= 0:
            raise SandboxError(f"a group id must be negative, got {chat_id!r}", reason="chat")
        if not title:
            raise SandboxError("a group needs a title", reason="chat")
        for member in members:
            self.user(member)
        chat = self.chats[chat_id] = Chat(chat_id, "group", title, set(members))
        self.touch()
        return chat

    def user(self, user_id: int) -> User:
        """The user ``user_id``, created on the fly ("user N") when unknown."""
        return self.users.get(user_id) or self.add_user(user_id, f"user {user_id}")

    def chat_for(self, user: User, chat_id: int | None) -> Chat:
        """The chat ``user`` writes in: their private chat, or a group they then belong to."""
        if chat_id is None or chat_id == user.id:
            return self.chats[user.id]
        chat = self.chats.get(chat_id)
        if chat is None or chat.kind != "group":
            raise SandboxError(f"user {user.id} cannot write in chat {chat_id}", reason="chat")
        if user.id not in chat.members:
            chat.members.add(user.id)
            self.touch()
        return chat

    def _next_message_id(self, chat_id: int) -> int:
        self._last_id[chat_id] = self._last_id.get(chat_id, 0) + 1
        return self._last_id[chat_id]

    def _append(self, chat: Chat, message: dict[str, Any]) -> None:
        self._conversation.setdefault(chat.id, []).append(message)
        self._on_message("message", message)
        self.touch()

    def write(self, user: User, chat: Chat, text: str) -> dict[str, Any]:
        """A user's message, as the Bot API shows it to the bot."""
        message: dict[str, Any] = {
            "message_id": self._next_message_id(chat.id),
            "from": user.to_api(),
            "chat": chat.to_api(),
            "date": int(time.time()),
            "text": text,
        }
        if entities := command_entities(text):
            message["entities"] = entities
        if chat.kind == "private":
            self.strangers.discard(user.id)  # writing to the bot starts it, as /start does
        self._append(chat, message)
        return message

    def send(
        self,
        chat: Chat,
        text: str,
        reply_markup: dict[str, Any] | None,
        parse_mode: str | None,
        at: float,
        *,
        reply_to: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The bot's message to ``chat``, delivered (a reply to ``reply_to`` when given)."""
        message: dict[str, Any] = {
            "message_id": self._next_message_id(chat.id),
            "from": self.bot,
            "chat": chat.to_api(),
            "date": int(time.time()),
            "text": text,
        }
        if reply_markup is not None:
            message["reply_markup"] = reply_markup
        if reply_to is not None:
            # As Telegram shows it: the replied message, without its own reply (one level).
            message["reply_to_message"] = {
                k: v for k, v in reply_to.items() if k != "reply_to_message"
            }
        replied = None if reply_to is None else int(reply_to["message_id"])
        sent = SentMessage(
            message["message_id"], chat.id, text, reply_markup, at, 0, parse_mode, replied
        )
        self._sent.setdefault(chat.id, []).append(sent)
        self._append(chat, message)
        return message

    def find(self, chat_id: int, message_id: int) -> dict[str, Any] | None:
        for message in self._conversation.get(chat_id, ()):
            if message["message_id"] == message_id:
                return message
        return None

    def edit(
        self, message: dict[str, Any], text: str, reply_markup: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Edit a bot message in place; its SentMessage counts the edit."""
        message["text"] = text
        message["edit_date"] = int(time.time())
        if reply_markup is None:
            message.pop("reply_markup", None)
        else:
            message["reply_markup"] = reply_markup
        chat_id = message["chat"]["id"]
        sent = self._sent.get(chat_id, [])
        for index, entry in enumerate(sent):
            if entry.message_id == message["message_id"]:
                sent[index] = replace(
                    entry, text=text, reply_markup=reply_markup, edits=entry.edits + 1
                )
        self._on_message("edit", message)
        self.touch()
        return message

    def messages(self, chat_id: int) -> list[SentMessage]:
        return list(self._sent.get(chat_id, ()))

    def history(self, chat_id: int) -> list[dict[str, Any]]:
        return [dict(message) for message in self._conversation.get(chat_id, ())]

    def snapshot(self) -> dict[str, Any]:
        """Everything :meth:`restore` needs, as JSON-ready values (shared, not copied: encode it
        before the world changes again)."""
        return {
            "users": [{"id": u.id, "first_name": u.first_name} for u in self.users.values()],
            "strangers": sorted(self.strangers),
            "chats": [
                {"id": c.id, "type": c.kind, "title": c.title, "members": sorted(c.members)}
                for c in self.chats.values()
            ],
            "conversation": {str(chat): messages for chat, messages in self._conversation.items()},
            # The bot's messages' own bookkeeping; their text and keyboard are the conversation's.
            "sent": {
                str(chat): [
                    {"message_id": m.message_id, "edits": m.edits, "parse_mode": m.parse_mode}
                    for m in sent
                ]
                for chat, sent in self._sent.items()
            },
        }

    def restore(self, snapshot: Any) -> None:
        """Replace users, chats and messages with a :meth:`snapshot`'s; ``ValueError`` (and
        nothing changed) when it is not one. Restored bot messages have ``at=0.0``: they were
        delivered before this run's clock started."""
        try:
            users = {u.id: u for u in map(_user, snapshot["users"])}
            chats = {c.id: c for c in map(_chat, snapshot["chats"])}
            for user in users.values():  # everyone has their private chat, as add_user makes
                chats.setdefault(user.id, Chat(user.id, "private", user.first_name, {user.id}))
            conversation = {
                int(chat): [_message(m) for m in messages]
                for chat, messages in snapshot["conversation"].items()
            }
            sent = {
                int(chat): _sent(int(chat), entries, conversation.get(int(chat), []))
                for chat, entries in snapshot["sent"].items()
            }
            strangers = {int(user) for user in snapshot.get("strangers", ())}
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"not a snapshot of a sandbox world ({error!r})") from None
        self.users, self.chats, self._conversation, self._sent = users, chats, conversation, sent
        self.strangers = strangers
        # Message ids go on from the last one in each chat, as on Telegram.
        self._last_id = {
            chat: max(m["message_id"] for m in messages)
            for chat, messages in conversation.items()
            if messages
        }
        self.touch()


def _user(data: dict[str, Any]) -> User:
    return User(int(data["id"]), str(data["first_name"]))


def _chat(data: dict[str, Any]) -> Chat:
    kind = data["type"]
    if kind not in ("private", "group"):
        raise ValueError(f"chat type {kind!r}")
    return Chat(int(data["id"]), kind, str(data["title"]), {int(m) for m in data["members"]})


def _message(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get("message_id"), int):
        raise ValueError("a message without a message_id")
    if not isinstance(data.get("chat"), dict) or not isinstance(data.get("from"), dict):
        raise ValueError(f"message {data['message_id']} without its chat or sender")
    return data


def _sent(
    chat: int, entries: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> list[SentMessage]:
    """The bot's messages in ``chat``; their text and keyboard are the conversation's."""
    by_id = {message["message_id"]: message for message in messages}
    sent = []
    for entry in entries:
        message = by_id[int(entry["message_id"])]
        mode = entry["parse_mode"]
        sent.append(
            SentMessage(
                message["message_id"],
                chat,
                str(message.get("text", "")),
                message.get("reply_markup"),
                0.0,
                int(entry["edits"]),
                None if mode is None else str(mode),
                (message.get("reply_to_message") or {}).get("message_id"),
            )
        )
    return sent

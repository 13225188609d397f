"""The names that go into keys, each checked before any wire traffic: queue names, the hash
tags of a sharded queue's shards (``q~k`` or ``q~k.n``, docs/concepts/shards.md: ``~`` is outside
the queue-name alphabet, so no queue can take a shard's tag), and lane names, dedup keys and bucket
names. echomq.engine.keys builds the keys from them and re-exports them.
"""

from __future__ import annotations

import re
from typing import Final

from echomq.engine.checks import utf8_size
from echomq.engine.shard_schedule import MAX_SHARDS
from echomq.errors import InvalidArgument

#: A queue may not be named this: its hash tag would collide with the deployment reserve.
RESERVED_QUEUE: Final = "emq"
#: The lane a job rides when enqueued without a group.
DEFAULT_GROUP: Final = "_"

_QUEUE_CHARS: Final = "A-Za-z0-9._-"
_QUEUE_RE: Final = re.compile(f"[{_QUEUE_CHARS}]+")
_QUEUE_MAX: Final = 128
#: The most UTF-8 bytes a lane name, a dedup key or a bucket name may take. Any character is
#: allowed: these names go into keys as their raw UTF-8 bytes, which the layout keeps apart
#: (docs/reference/keyspace.md, "Names in keys"); the bound is for memory, not for Valkey.
MAX_NAME_BYTES: Final = 1024


def _check_name(
    argument: str, value: object, pattern: re.Pattern[str], chars: str, max_length: int
) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(argument, value, f"must be a str, got {type(value).__name__}")
    if not 1 <= len(value) <= max_length:
        raise InvalidArgument(
            argument, value, f"must be 1 to {max_length} characters, got {len(value)}"
        )
    if pattern.fullmatch(value) is None:
        position, char = next((i, c) for i, c in enumerate(value) if pattern.fullmatch(c) is None)
        raise InvalidArgument(
            argument,
            value,
            f"character {char!r} at position {position} is not allowed (allowed: {chars})",
        )
    return value


def validate_text_name(argument: str, value: object) -> str:
    """Return ``value`` if it is a legal lane name, dedup key or bucket name: a non-empty ``str``
    of at most ``MAX_NAME_BYTES`` bytes of UTF-8. Every character is allowed (NUL, newlines,
    braces, emoji); a lone surrogate is not a character and cannot be encoded, so it is refused.
    """
    if not isinstance(value, str):
        raise InvalidArgument(argument, value, f"must be a str, got {type(value).__name__}")
    # The common case is ASCII: one byte per character, nothing to encode.
    size = len(value) if value.isascii() else utf8_size(value, argument)
    if not 1 <= size <= MAX_NAME_BYTES:
        raise InvalidArgument(
            argument, value, f"must be 1 to {MAX_NAME_BYTES} bytes of UTF-8, got {size}"
        )
    return value


def validate_queue(name: object) -> str:
    """Return ``name`` if it is a legal queue name: ``[A-Za-z0-9._-]{1,128}`` and not ``emq``."""
    queue = _check_name("queue name", name, _QUEUE_RE, _QUEUE_CHARS, _QUEUE_MAX)
    if queue == RESERVED_QUEUE:
        raise InvalidArgument(
            "queue name", queue, "'emq' is reserved for the deployment-wide {emq}: keys"
        )
    return queue


#: What joins a queue's name to a shard's index in the shard's tag: outside the queue alphabet.
SHARD_MARK: Final = "~"
#: The nonces a shard tag may carry (``q~k.n``, 1 <= n < MAX_NONCE): tag choice tries them in
#: turn for one whose slot a given primary serves; a primary holding one slot is found long
#: before (each try hits it with odds 1/16384).
MAX_NONCE: Final = 1_000_000
_NUMBER: Final = "[1-9][0-9]{0,8}"  # from 1, no leading zero; bounded before int() reads it
_SHARD_TAG_RE: Final = re.compile(
    rf"(?P<queue>[{_QUEUE_CHARS}]+)(?:~(?P<index>{_NUMBER})(?:\.(?P<nonce>{_NUMBER}))?)?"
)


def shard_tag(queue: str, index: int, nonce: int = 0) -> str:
    """The hash tag of shard ``index`` of ``queue``: the queue's own name for shard 0, else
    ``q~index``, or ``q~index.nonce`` when ``nonce`` is not 0."""
    validate_queue(queue)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < MAX_SHARDS:
        raise InvalidArgument("shard", index, f"must be an int from 0 to {MAX_SHARDS - 1}")
    if isinstance(nonce, bool) or not isinstance(nonce, int) or not 0 <= nonce < MAX_NONCE:
        raise InvalidArgument("nonce", nonce, f"must be an int from 0 to {MAX_NONCE - 1}")
    if index == 0:
        if nonce:
            raise InvalidArgument("nonce", nonce, "must be 0 for shard 0 (the queue's own tag)")
        return queue
    return f"{queue}{SHARD_MARK}{index}" + (f".{nonce}" if nonce else "")


def parse_shard_tag(tag: object) -> tuple[str, int]:
    """``(queue, shard)`` of a shard's hash tag (``q`` is shard 0 of ``q``, ``q~3.7`` shard 3):
    the queue is the text before the first ``~``. Raises ``InvalidArgument`` ("shard tag")."""
    if not isinstance(tag, str):
        raise InvalidArgument("shard tag", tag, f"must be a str, got {type(tag).__name__}")
    match = _SHARD_TAG_RE.fullmatch(tag)
    if match is None:
        raise InvalidArgument(
            "shard tag",
            tag,
            "must be <queue>, <queue>~<shard> or <queue>~<shard>.<nonce> (shard and nonce "
            "from 1, no leading zero)",
        )
    queue = match["queue"]
    try:
        validate_queue(queue)
    except InvalidArgument as refused:
        raise InvalidArgument("shard tag", tag, f"its queue {refused.reason}") from None
    index = int(match["index"] or 0)
    nonce = int(match["nonce"] or 0)
    if index >= MAX_SHARDS:
        raise InvalidArgument("shard tag", tag, f"its shard must be below {MAX_SHARDS}")
    if nonce >= MAX_NONCE:
        raise InvalidArgument("shard tag", tag, f"its nonce must be below {MAX_NONCE}")
    return queue, index


def validate_group(name: object) -> str:
    """Return ``name`` if it is a legal group (lane) name: any ``str`` of 1 to
    ``MAX_NAME_BYTES`` bytes of UTF-8 (see ``validate_text_name``)."""
    return validate_text_name("lane", name)


def validate_dedup(key: object) -> str:
    """Return ``key`` if it is a legal producer dedup key: any ``str`` of 1 to
    ``MAX_NAME_BYTES`` bytes of UTF-8 (see ``validate_text_name``)."""
    return validate_text_name("dedup key", key)


def validate_bucket(name: object) -> str:
    """Return ``name`` if it is a legal token bucket name: any ``str`` of 1 to
    ``MAX_NAME_BYTES`` bytes of UTF-8 (see ``validate_text_name``)."""
    return validate_text_name("bucket name", name)

"""Payload codecs: how a job's payload becomes the bytes stored in its row, and back.

JSON by default; raw bytes for callers that bring their own encoding. Never pickle: a payload
must not be able to run code in the worker that decodes it.
"""

from __future__ import annotations

import json
from typing import Any, Final, Protocol

from echomq.errors import InvalidArgument, shown

#: The deepest a JSON value may nest (``[[1]]`` is 2 deep): serde_json's default limit, so
#: any common decoder reads what is admitted; checked without recursion, so the bound is the
#: same whatever the caller's stack (the interpreter's limit is not).
MAX_DEPTH: Final = 128


def too_deep(value: Any, most: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists, tuples or dicts more than ``most`` deep (a loop over an
    explicit stack: a value nested past the recursion limit is measured like any other)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list | tuple):
            continue
        if depth > most:
            return True
        stack.extend((child, depth + 1) for child in item if isinstance(child, list | tuple | dict))
    return False


def levels(encoded: str, most: int = MAX_DEPTH) -> int:
    """How deep the JSON text ``encoded`` nests (``most + 1`` for anything deeper), in C-speed
    string operations: outside its strings (escapes dropped, then every other run between
    quotes) only brackets matter, and each pass that deletes the innermost pairs is a level."""
    outside = "".join(encoded.replace("\\\\", "").replace('\\"', "").split('"')[::2])
    bare = outside.encode().translate(_FOLD, _NOT_BRACKETS)
    depth = 0
    while bare and depth <= most:
        depth += 1
        bare = bare.replace(b"[]", b"")
    return depth


_FOLD = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def nesting_checked(value: Any, encoded: str, argument: str) -> str:
    """``encoded`` (the JSON of ``value``) once its nesting is within :data:`MAX_DEPTH`.

    Free for the usual value: nesting is at most the count of ``[`` and ``{`` in the text, so
    only a text with more of them than the bound is measured (:func:`levels`)."""
    if encoded.count("[") + encoded.count("{") > MAX_DEPTH and levels(encoded) > MAX_DEPTH:
        raise InvalidArgument(argument, shown(value, 80), f"nests deeper than {MAX_DEPTH} levels")
    return encoded


class Codec(Protocol):
    def encode(self, payload: Any) -> bytes: ...

    def decode(self, data: bytes) -> Any: ...


class JsonCodec:
    """Compact UTF-8 JSON. Refuses what JSON cannot carry (sets, bytes, NaN…) before any I/O."""

    def __init__(self) -> None:
        # One encoder, built once: json.dumps with options builds a new one per call.
        self._encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        self._decoder = json.JSONDecoder()

    def encode(self, payload: Any) -> bytes:
        return checked_json(payload, "payload", "not JSON-encodable", self._encoder)[1]

    def decode(self, data: bytes) -> Any:
        # UTF-8 bytes (what encode writes) straight to the decoder: json.loads sniffs the
        # encoding of bytes first, which costs more than the decoding of a small payload. Any
        # other input, or one that fails here (a BOM, UTF-16), takes json.loads's way.
        if type(data) is bytes:
            try:
                return self._decoder.decode(data.decode())
            except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                pass
        return json.loads(data)


class RawCodec:
    """Payloads are bytes already (str is UTF-8 encoded); decoding returns the bytes."""

    def encode(self, payload: Any) -> bytes:
        if isinstance(payload, bytes | bytearray | memoryview):
            return bytes(payload)
        if isinstance(payload, str):
            return payload.encode()
        raise InvalidArgument("payload", shown(payload, 80), "RawCodec takes bytes or str")

    def decode(self, data: bytes) -> Any:
        return data


def checked_json(
    value: Any, argument: str, refusal: str, encoder: json.JSONEncoder
) -> tuple[str, bytes]:
    """``value`` as compact JSON text and its UTF-8 bytes, or ``InvalidArgument`` naming
    ``argument`` (``refusal``: what the message says first) for what JSON cannot carry (sets,
    bytes, NaN, a lone surrogate) or what nests deeper than ``MAX_DEPTH`` levels."""
    try:
        encoded = encoder.encode(value)
        data = encoded.encode()  # a lone surrogate: UnicodeEncodeError, a ValueError
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(argument, shown(value, 80), f"{refusal}: {exc}") from None
    except RecursionError:
        # A self-referencing structure is caught as ValueError; this is depth, the value's
        # (refused) or the caller's stack (a value within the bound: the caller's error).
        if too_deep(value):
            raise InvalidArgument(
                argument, shown(value, 80), f"nests deeper than {MAX_DEPTH} levels"
            ) from None
        raise
    nesting_checked(value, encoded, argument)
    return encoded, data

"""Payload codecs: how a job's payload becomes the bytes stored in its row, and back.

JSON by default; raw bytes for callers that bring their own encoding. Never pickle: a payload
must not be able to run code in the worker that decodes it.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from echomq.errors import InvalidArgument


class Codec(Protocol):
    def encode(self, payload: Any) -> bytes: ...

    def decode(self, data: bytes) -> Any: ...


class JsonCodec:
    """Compact UTF-8 JSON. Refuses what JSON cannot carry (sets, bytes, NaN…) before any I/O."""

    def __init__(self) -> None:
        # One encoder, built once: json.dumps with options builds a new one per call.
        self._encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    def encode(self, payload: Any) -> bytes:
        try:
            return self._encoder.encode(payload).encode()
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(
                "payload", _preview(payload), f"not JSON-encodable: {exc}"
            ) from None
        except RecursionError:
            # A self-referencing structure is caught as ValueError; this is real depth.
            raise InvalidArgument(
                "payload", _preview(payload), "nested too deeply to encode as JSON"
            ) from None

    def decode(self, data: bytes) -> Any:
        return json.loads(data)


class RawCodec:
    """Payloads are bytes already (str is UTF-8 encoded); decoding returns the bytes."""

    def encode(self, payload: Any) -> bytes:
        if isinstance(payload, bytes | bytearray | memoryview):
            return bytes(payload)
        if isinstance(payload, str):
            return payload.encode()
        raise InvalidArgument("payload", _preview(payload), "RawCodec takes bytes or str")

    def decode(self, data: bytes) -> Any:
        return data


def _preview(payload: Any) -> str:
    try:
        text = repr(payload)
    except RecursionError:
        text = f"<deeply nested {type(payload).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."

"""JsonCodec.decode's fast path (UTF-8 bytes straight to the decoder) answers as json.loads does
for every input json.loads takes: a BOM, UTF-16, str, bytearray, and bad JSON alike."""

from __future__ import annotations

import json

import pytest

from echomq.wire.codec import JsonCodec


@pytest.mark.parametrize(
    "data",
    [
        b'{"task":"t","args":{"n":5}}',
        '{"é": [1, 2.5, null]}'.encode(),
        b"\xef\xbb\xbf[1, 2]",  # a UTF-8 BOM
        '{"a": "ü"}'.encode("utf-16"),
        '{"a": 1}',
        bytearray(b"[3]"),
    ],
)
def test_decode_matches_json_loads(data: bytes) -> None:
    assert JsonCodec().decode(data) == json.loads(data)


def test_bad_json_raises_as_json_loads_does() -> None:
    with pytest.raises(json.JSONDecodeError):
        JsonCodec().decode(b"{nope")
    with pytest.raises(UnicodeDecodeError):
        JsonCodec().decode(b"\xff\xfe\xfd")  # json.loads's own error for undecodable bytes

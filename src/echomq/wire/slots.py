"""Cluster slots and the deployment's fence key: what the wire needs to route a key and to
fence a connection, below the engine that builds the keys (echomq.engine.keys re-exports them).
"""

from __future__ import annotations

import binascii
from typing import Final

#: The deployment-wide wire-version fence; its own hash tag keeps it apart from every queue.
VERSION_KEY: Final = "{emq}:version"

SLOTS: Final = 16384


def crc16(data: bytes) -> int:
    """CRC16-XMODEM (poly 0x1021, init 0), the checksum behind Valkey Cluster slots: the
    standard library's ``binascii.crc_hqx`` is that CRC, in C (~20x a table loop in Python)."""
    return binascii.crc_hqx(data, 0)


def slot(key: str | bytes) -> int:
    """The cluster slot of ``key``: CRC16 of its hash tag (the first non-empty ``{…}``) mod 16384.

    As in Valkey, only the first ``{`` counts; an empty ``{}`` or an unclosed ``{`` means the
    whole key is hashed.
    """
    data = key.encode() if isinstance(key, str) else key
    start = data.find(b"{")
    if start != -1:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1 : end]
    return crc16(data) % SLOTS

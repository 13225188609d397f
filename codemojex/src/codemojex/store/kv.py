"""The small typed layer over Valkey that the stages' own keys use: the only module of the game
(with the board) that speaks commands on the wire. Keys come from :mod:`codemojex.keyspace`.

Each method is one command (or one pipelined batch) and answers Python values, never raw
replies: ``bytes`` become ``str``, counts become ``bool`` or ``int``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from echomq.wire import Wire


def text(value: object) -> str:
    """A reply as ``str`` (RESP answers ``bytes``)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def ms(seconds: float) -> int:
    """Seconds as the whole milliseconds ``PX`` takes (at least 1)."""
    return max(1, round(seconds * 1000))


class Valkey:
    """Typed key/value commands on ``wire`` (a pool, usually the queues' own)."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    async def get(self, key: str) -> str | None:
        raw = await self.wire.call("GET", key)
        return None if raw is None else text(raw)

    async def put(self, key: str, value: str | int, ttl: float) -> None:
        """``SET key value PX ttl``."""
        await self.wire.call("SET", key, value, "PX", ms(ttl))

    async def claim(self, key: str, value: str, ttl: float) -> str | None:
        """``SET key value NX GET PX ttl``: ``None`` when this call set it, else the holder."""
        found = await self.wire.call("SET", key, value, "NX", "GET", "PX", ms(ttl))
        return None if found is None else text(found)

    async def delete(self, *keys: str) -> int:
        return int(await self.wire.call("DEL", *keys)) if keys else 0

    async def push_capped(self, key: str, value: str, cap: int, ttl: float) -> None:
        """``RPUSH``, then ``LTRIM`` to the last ``cap`` and ``PEXPIRE ttl``, pipelined."""
        await self.wire.call_many(
            [("RPUSH", key, value), ("LTRIM", key, -cap, -1), ("PEXPIRE", key, ms(ttl))]
        )

    async def pop_all(self, key: str, most: int) -> list[str]:
        """``LPOP key most``: up to ``most`` items from the head, taken atomically."""
        found = await self.wire.call("LPOP", key, most)
        return [text(item) for item in found or ()]

    async def add(self, key: str, member: str | int) -> bool:
        """``SADD``: True when ``member`` was not in the set."""
        return bool(await self.wire.call("SADD", key, member))

    async def remove(self, key: str, member: str | int) -> bool:
        """``SREM``: True when ``member`` was in the set."""
        return bool(await self.wire.call("SREM", key, member))

    async def has(self, key: str, member: str | int) -> bool:
        return bool(await self.wire.call("SISMEMBER", key, member))

    async def members(self, key: str) -> set[str]:
        return {text(member) for member in await self.wire.call("SMEMBERS", key)}

    async def probe(self, exists: str, member_of: tuple[str, str | int]) -> Probe:
        """One round trip: whether ``exists`` exists, and whether ``member_of`` = (set, member)
        holds."""
        found, member = await self.wire.call_many([("EXISTS", exists), ("SISMEMBER", *member_of)])
        return Probe(bool(found), bool(member))

    async def post(self, key: str, fields: dict[str, str], counter: str, ttl: float) -> int:
        """``HSET key fields…``, then ``HINCRBY key counter 1`` and ``PEXPIRE key ttl`` in one
        pipelined round trip: the counter's new value, which every field set before it is under."""
        pairs = [part for item in fields.items() for part in item]
        _, count, _ = await self.wire.call_many(
            [("HSET", key, *pairs), ("HINCRBY", key, counter, 1), ("PEXPIRE", key, ms(ttl))]
        )
        return int(count)

    async def fields(self, key: str) -> dict[str, str]:
        """``HGETALL``: one consistent snapshot of a hash."""
        reply = await self.wire.call("HGETALL", key)
        if isinstance(reply, dict):
            return {text(k): text(v) for k, v in reply.items()}
        return {text(k): text(v) for k, v in zip(reply[::2], reply[1::2], strict=True)}

    async def set_fields(self, key: str, fields: dict[str, str]) -> None:
        await self.wire.call("HSET", key, *(part for item in fields.items() for part in item))

    async def drop_field(self, key: str, field: str) -> None:
        await self.wire.call("HDEL", key, field)

    async def delete_matching(self, patterns: Sequence[str]) -> int:
        """Delete every key matching one of ``patterns`` (``SCAN``; for cleanup and tests)."""
        deleted = 0
        for pattern in patterns:
            cursor: bytes | str | int = b"0"
            while True:
                cursor, keys = await self.wire.call("SCAN", cursor, "MATCH", pattern, "COUNT", 500)
                deleted += await self.delete(*(text(key) for key in keys))
                if cursor in (b"0", 0, "0"):
                    break
        return deleted


@dataclass(frozen=True, slots=True)
class Probe:
    """What :meth:`Valkey.probe` found."""

    exists: bool
    is_member: bool

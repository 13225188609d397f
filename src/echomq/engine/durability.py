"""Acknowledged means on disk, when asked: the :class:`Durability` a queue may hold, and how a
``WAITAOF`` reply is judged against it.

With a durability, every admission (and, with ``settles``, every complete and retry) is followed
by ``WAITAOF numlocal numreplicas timeout`` on the same connection, so one wait covers a whole
batch: in the same write when local-only, once the writes' replies are in when it counts
replicas (``Connector.call_durable``; docs/concepts/delivery.md, "Durability").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from echomq.engine.checks import count, ms
from echomq.errors import (
    DurabilityUnavailable,
    EchoMQError,
    InvalidArgument,
    NotDurable,
    ServerError,
    WireError,
)

#: The most replicas a durability may wait for (a shard with more is unusual).
MAX_REPLICAS: Final = 16
#: The longest a durability may wait for its fsyncs, in seconds.
MAX_WAIT: Final = 60.0
_AOF_OFF: Final = "appendonly is disabled"


@dataclass(frozen=True, slots=True)
class Durability:
    """What an acknowledged write must have reached before the call answers.

    ``local``: the server fsynced it to its append-only file (needs ``appendonly yes``).
    ``replicas``: that many replicas fsynced it to theirs (0: none waited for).
    ``timeout``: seconds to wait for those fsyncs; short of them, :class:`NotDurable`.
    ``settles``: completes and retries (dead-lettering too) wait as well, not only admissions.

    ``Durability()`` is "on this server's disk"; ``Durability(replicas=1)`` adds "and on one
    replica's disk", which is what survives a failover (docs/concepts/delivery.md).
    """

    local: bool = True
    replicas: int = 0
    timeout: float = 1.0
    settles: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.local, bool):
            raise InvalidArgument("durability.local", self.local, "must be True or False")
        count(self.replicas, "durability.replicas", minimum=0, maximum=MAX_REPLICAS)
        if not self.local and self.replicas == 0:
            raise InvalidArgument(
                "durability.replicas", 0, "asks for nothing with local=False: ask for >= 1"
            )
        ms(self.timeout, "durability.timeout", positive=True, most=MAX_WAIT)
        if not isinstance(self.settles, bool):
            raise InvalidArgument("durability.settles", self.settles, "must be True or False")

    @property
    def asked(self) -> tuple[int, int]:
        """``(local fsyncs, replica fsyncs)`` as ``WAITAOF`` counts them."""
        return int(self.local), self.replicas

    def command(self) -> tuple[str, int, int, int]:
        """The ``WAITAOF`` that follows a durable batch on its connection."""
        return (
            "WAITAOF",
            int(self.local),
            self.replicas,
            ms(self.timeout, "timeout", positive=True),
        )

    def mark(self, key: str) -> tuple[str, str, int, str, int]:
        """The write that makes a wait cover what a ``duplicate`` answer points at: a wait
        covers only the writes of its own connection, and a duplicate wrote nothing there
        (its job may come from another connection, or a send whose wait fell short). After
        any write the server's fsync offset must pass everything written before it."""
        return ("SET", key, 1, "PX", 1000)

    def shortfall(self, waits: Sequence[Any], ids: Sequence[str]) -> EchoMQError | None:
        """Judge the ``WAITAOF`` replies of one batch (one per pipeline it took): None when
        each confirmed what is asked; else the error for every written item of ``ids``.

        A wait lost with its connection is that :class:`WireError` (its pipeline's items carry
        it already); an answer short of the asked counts is :class:`NotDurable`. A server with
        ``appendonly no`` raises :class:`DurabilityUnavailable` (a setting, not one batch).
        """
        asked = self.asked
        for reply in waits:
            if isinstance(reply, WireError):
                return reply
            if isinstance(reply, ServerError):
                if _AOF_OFF in reply.message:
                    raise DurabilityUnavailable(_AOF_HINT)
                return NotDurable(tuple(ids), asked, (0, 0), self.timeout, reply.message)
            if isinstance(reply, EchoMQError):
                return reply
            got = (int(reply[0]), int(reply[1]))
            if got[0] < asked[0] or got[1] < asked[1]:
                return NotDurable(tuple(ids), asked, got, self.timeout)
        return None


_AOF_HINT: Final = (
    "a local fsync needs `appendonly yes` (WAITAOF cannot confirm one otherwise); pair it "
    "with `appendfsync always` for low latency, or ask Durability(local=False, replicas=N)"
)


def check_persistence(info: Any, durability: Durability, address: str = "") -> None:
    """Refuse a server whose ``INFO persistence`` says AOF is off when a local fsync is asked."""
    if not durability.local:
        return
    text = info.decode() if isinstance(info, bytes) else str(info)
    if "aof_enabled:1" not in text:
        raise DurabilityUnavailable(_AOF_HINT, address=address)


def validate(durability: Any, call_timeout: float) -> Durability | None:
    """A queue's ``durability`` argument: a :class:`Durability` or None (the default). Its
    ``WAITAOF`` must answer before the connector's watchdog gives up on the socket, so its
    timeout must be below the connection's ``call_timeout``."""
    if durability is None:
        return None
    if not isinstance(durability, Durability):
        raise InvalidArgument(
            "durability", durability, "must be a Durability (echomq.engine.Durability(...)) or None"
        )
    if durability.timeout >= call_timeout:
        raise InvalidArgument(
            "durability.timeout",
            durability.timeout,
            f"must be below the connection's call_timeout ({call_timeout:g} s)",
        )
    return durability

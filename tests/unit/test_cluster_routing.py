"""Which slot a command goes to: key positions for the commands echomq sends, no server."""

from __future__ import annotations

import pytest

from echomq.engine.keys import Keyspace, slot
from echomq.errors import CrossSlotError, InvalidArgument
from echomq.wire.cluster import command_keys, command_slot


def test_scripts_route_by_their_declared_keys_only() -> None:
    ks = Keyspace("orders")
    command = ("EVALSHA", "ab" * 20, 2, ks.root, ks.gate, "JOB0000000001", "payload")
    assert command_keys(command) == (ks.root, ks.gate)
    assert command_slot(command) == slot("orders")
    assert command_keys(("EVALSHA", "ab" * 20, 0, "arg")) == ()


@pytest.mark.parametrize(
    ("command", "keys"),
    [
        (("BLPOP", "emq:{q}:wake", "1.000"), ("emq:{q}:wake",)),
        (("MGET", "a", "b"), ("a", "b")),
        (("PUBSUB", "SHARDNUMSUB", "emq:{q}:events"), ("emq:{q}:events",)),
        (("PUBSUB", "NUMSUB", "emq:{q}:events"), ()),
        (("SPUBLISH", "emq:{q}:events", "{}"), ("emq:{q}:events",)),
        (("HGETALL", "emq:{q}:job:x"), ("emq:{q}:job:x",)),
        (("TIME",), ()),
        (("SCRIPT", "LOAD", "return 1"), ()),
        (("MSET", "k1", "v1", "k2", "v2"), ("k1", "k2")),
    ],
)
def test_key_positions(command: tuple[str, ...], keys: tuple[str, ...]) -> None:
    assert tuple(command_keys(command)) == keys


def test_keys_of_two_queues_are_refused_with_both_slots_named() -> None:
    with pytest.raises(CrossSlotError) as caught:
        command_slot(("DEL", "emq:{a}:ring", "emq:{b}:ring"))
    assert isinstance(caught.value, InvalidArgument)
    assert caught.value.slots == {"emq:{a}:ring": slot("a"), "emq:{b}:ring": slot("b")}
    assert "DEL needs all its keys in one cluster slot" in str(caught.value)

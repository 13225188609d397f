"""A WAIT/WAITAOF in a cluster pipeline rides with the command before it, and is sent again behind
the commands a redirection sends elsewhere, its answers met at the lower counts."""

from __future__ import annotations

from echomq.errors import ServerError
from echomq.wire.cluster import _Earlier, _follow_sticky, _lower, command_slot


def test_a_wait_is_keyless_on_its_own() -> None:
    assert command_slot(("WAITAOF", 1, 0, 100)) is None
    assert command_slot(("WAIT", 1, 100)) is None


def test_a_wait_follows_the_commands_a_redirection_resends() -> None:
    todo = [1]  # command 1 answered ASK; command 0 was answered where it was sent
    asking = {1: "10.0.0.2:7001"}
    replies: list[object] = ["ok", "ASK", [1, 1]]
    _follow_sticky([2], todo, asking, replies)
    assert todo == [1, 2]
    assert asking[2] == "10.0.0.2:7001"  # behind ASKING, on the node the writes went to
    assert isinstance(replies[2], _Earlier)


def test_a_wait_whose_commands_all_stayed_is_not_resent() -> None:
    todo = [4]  # only a command after the wait moves
    replies: list[object] = ["ok", "ok", [1, 0], "ok", "MOVED"]
    _follow_sticky([2], todo, {}, replies)
    assert todo == [4]
    assert replies[2] == [1, 0]


def test_the_lower_answer_stands() -> None:
    assert _lower(_Earlier([1, 1]), [1, 0]) == [1, 0]
    assert _lower(_Earlier([0, 1]), [1, 1]) == [0, 1]
    assert _lower(_Earlier(2), 1) == 1
    refused = ServerError("ERR WAITAOF cannot be used when numlocal is set")
    assert _lower(_Earlier(refused), [1, 1]) is refused
    assert _lower(_Earlier([1, 1]), refused) is refused

"""A cluster batch's wait answers are met at the weakest: each node that took some of its writes
answered for those only, so the lowest counts (or an error) stand for the batch."""

from __future__ import annotations

import functools

from echomq.errors import ServerError
from echomq.wire.cluster import _lower, command_slot


def test_a_wait_is_keyless() -> None:
    assert command_slot(("WAITAOF", 1, 0, 100)) is None
    assert command_slot(("WAIT", 1, 100)) is None


def test_the_lowest_answer_stands() -> None:
    assert functools.reduce(_lower, [[1, 1], [1, 0], [1, 1]]) == [1, 0]
    assert _lower([0, 1], [1, 1]) == [0, 1]
    assert _lower(2, 1) == 1
    refused = ServerError("ERR WAITAOF cannot be used when numlocal is set")
    assert _lower(refused, [1, 1]) is refused
    assert _lower([1, 1], refused) is refused

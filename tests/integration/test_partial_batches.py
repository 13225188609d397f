"""A batch cut by a dropped connection keeps what is known: the answered items keep their
verdicts, the rest answer ``unknown``, nothing is raised away, and resending is idempotent."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
from collections.abc import Awaitable, Sequence
from typing import Any

import pytest

from echomq import ConnectionOptions, Item, Queue, Verdict
from echomq.wire import Connector, Wire
from echomq.wire.connector import Arg, Command

ITEMS = 4000  # about 31 pipelined chunks: the server is still busy when the kill lands


class Watched:
    """The queue's real wire, with an event set once one of its pipelines is answered."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.options = wire.options
        self.answered = asyncio.Event()

    def call(self, *args: Arg) -> Awaitable[Any]:
        return self.wire.call(*args)

    def call_many(self, commands: Sequence[Command]) -> Awaitable[list[Any]]:
        future = asyncio.ensure_future(self.wire.call_many(commands))
        future.add_done_callback(self._done)
        return future

    def _done(self, future: asyncio.Future[list[Any]]) -> None:
        if not future.cancelled() and future.exception() is None:
            self.answered.set()

    async def close(self) -> None:
        await self.wire.close()


async def _admit_while_killed(queue: Queue, watched: Watched, items: list[Item]) -> list[Verdict]:
    """enqueue_many, with the queue's socket killed by CLIENT KILL once the first chunk's
    answers have arrived, while the server is still working through the rest."""
    client_id = await queue.wire.call("CLIENT", "ID")
    async with Connector(queue.wire.options, version_fence=None) as admin:
        admitting = asyncio.ensure_future(queue.enqueue_many(items))
        await watched.answered.wait()
        assert await admin.call("CLIENT", "KILL", "ID", client_id) == 1
        return await admitting


async def test_enqueue_many_cut_mid_batch_keeps_answered_verdicts_and_resends_safely(
    valkey_url: str, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    wire = await Connector(ConnectionOptions.from_url(valkey_url)).connect()
    watched = Watched(wire)
    queue = Queue(queue_name, watched, events=False)
    try:
        await queue.enqueue("loads the script", lane="warm-up")  # no NOSCRIPT round below
        items = [Item({"n": n}) for n in range(ITEMS)]
        verdicts = await _admit_while_killed(queue, watched, items)

        kinds = [v.kind for v in verdicts]
        assert set(kinds) == {"enqueued", "unknown"}, f"not cut mid-batch: {set(kinds)}"
        # Input order holds: answered chunks first, the cut ones after.
        assert kinds == sorted(kinds), "an answered verdict came after an unknown one"
        unknown = [(item, v) for item, v in zip(items, verdicts, strict=True) if not v.ok]
        assert all("connection lost" in str(v.error) for _, v in unknown)
        for v in verdicts[:10]:
            assert await queue.state(v.id) == "pending"

        # Resending the unknown items with their ids admits each exactly once.
        again = await queue.enqueue_many([dataclasses.replace(i, id=v.id) for i, v in unknown])
        assert {v.kind for v in again} <= {"enqueued", "duplicate"}
        assert [v.id for v in again] == [v.id for _, v in unknown]
        assert await queue.lane("_").depth() == ITEMS
        payloads = {(await queue.job(v.id)).payload["n"] for v in verdicts[-5:]}  # type: ignore[union-attr]
        assert payloads == {item.payload["n"] for item in items[-5:]}

        gc.collect()  # an unretrieved chunk exception is logged when its future is collected
        assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    finally:
        await queue.pause()
        await queue.obliterate(force=True)
        await wire.close()

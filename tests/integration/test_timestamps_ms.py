"""A millisecond timestamp (BullMQ's unit, ``Date.now()``) given where echomq takes Unix seconds
is refused before any write, on the async queue, the blocking one and a task's ``using(at=)``."""

from __future__ import annotations

import asyncio
import time

import pytest

from echomq import App, InvalidArgument, Queue, SyncQueue


async def test_enqueue_at_refuses_milliseconds_and_writes_nothing(queue: Queue) -> None:
    with pytest.raises(InvalidArgument, match="looks like milliseconds") as refused:
        await queue.enqueue_at(1_700_000_000_000, {"n": 1})
    assert refused.value.argument == "when"
    assert await queue.wire.call("KEYS", queue.keys.root + "*") == []


async def test_sync_enqueue_at_refuses_milliseconds_and_writes_nothing(
    valkey_url: str, queue: Queue
) -> None:
    def refuse() -> InvalidArgument:
        with SyncQueue.connect(valkey_url, queue.name) as sync:
            with pytest.raises(InvalidArgument, match="looks like milliseconds") as refused:
                sync.enqueue_at(time.time() * 1000, {"n": 1}, lane="acme")
            return refused.value

    assert (await asyncio.to_thread(refuse)).argument == "when"
    assert await queue.wire.call("KEYS", queue.keys.root + "*") == []


async def test_task_using_at_refuses_milliseconds_naming_at(valkey_url: str, queue: Queue) -> None:
    app = App(valkey_url, queue=queue.name)

    @app.task()
    async def tick(n: int) -> int:
        return n

    async with app:
        with pytest.raises(InvalidArgument, match="looks like milliseconds") as refused:
            await tick.using(at=time.time() * 1000).enqueue(1)
    assert refused.value.argument == "at"
    assert await queue.wire.call("KEYS", queue.keys.root + "*") == []

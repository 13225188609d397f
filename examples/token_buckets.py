"""Token buckets for a third-party API: Telegram-style budgets (30 messages a second in all,
one a second per chat with a burst of 3), held in the engine so every worker on every host
spends the same tokens. A task that finds no token defers itself (no attempt counted).

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/token_buckets.py

docs/guides/token-buckets.md shows this file; tests/examples/test_examples.py runs it.
"""

from __future__ import annotations

import asyncio
import os

from echomq import App, AppWorker, Defer, context
from echomq.engine import Bucket, Buckets, Wait

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="buckets-demo")
GLOBAL = Bucket("global", rate=30.0, burst=30)  # tokens per second, at most `burst` saved up
SENT: list[int] = []


def per_chat(chat: int) -> Bucket:
    return Bucket(f"chat:{chat}", rate=1.0, burst=3)


@app.task(lane="chat")  # a lane per chat: one chat's burst cannot starve the others
async def send(chat: int, text: str) -> None:
    buckets = Buckets(context().app.queue("buckets-demo").wire, "telegram")
    taken = await buckets.take([GLOBAL, per_chat(chat)])  # all or nothing, atomically
    if isinstance(taken, Wait):
        raise Defer(after=taken.wait)  # run again once the tokens are there; not a failure
    SENT.append(chat)  # … call the API here …


async def main() -> None:
    async with app:
        buckets = Buckets(app.queue("buckets-demo").wire, "telegram")
        first = [await buckets.take([per_chat(7)]) for _ in range(4)]
        print("chat 7, four takes at once:", [type(t).__name__ for t in first])
        worker = AppWorker(app)
        running = asyncio.create_task(worker.run())
        handles = await app.enqueue_many([send.call(8, f"message {n}") for n in range(5)])
        for handle in handles:
            await handle.result(timeout=30)
        worker.stop()
        await running
        print(f"chat 8: {len(SENT)} sent, the last two after waiting for their tokens")


if __name__ == "__main__":
    asyncio.run(main())

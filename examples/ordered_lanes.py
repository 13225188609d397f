"""Ordered lanes: a chat's replies go out in the order they were sent, whatever the workers do.

Eight replies, ABCDABCD, to each of two group chats; ten jobs in flight at once; every "B" is
over its chat's send budget the first time and deferred, every "C" fails once and is retried.
With ``queue.ordered(True)`` each chat (a lane) is served one reply at a time, and a deferred
or retried reply keeps its place at the head of its chat: nothing overtakes it.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/ordered_lanes.py
"""

from __future__ import annotations

import asyncio
import os

from echomq import App, AppWorker, Defer, Retry, context

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="ordered-demo")
SENT: dict[str, list[str]] = {}


@app.task(lane="chat")
async def reply(chat: str, text: str) -> None:
    first_try = context().attempt == 1
    if first_try and text.startswith("B"):
        raise Defer(0.05, "over the chat's send budget")  # later, no attempt spent
    if first_try and text.startswith("C"):
        raise Retry(0.05, "the Bot API answered 502")  # a failed attempt, tried again
    SENT.setdefault(chat, []).append(text)


async def main() -> None:
    async with app:
        # Queue-wide and stored in the engine: every producer and worker process obeys it.
        await app.queue("ordered-demo").ordered(True)
        await app.enqueue_many(
            [reply.call(chat, letter) for letter in "ABCDABCD" for chat in ("g-1", "g-2")]
        )
        await AppWorker(app).run_until_idle()
    for chat, texts in sorted(SENT.items()):
        print(f"{chat}: {' '.join(texts)}")


if __name__ == "__main__":
    asyncio.run(main())

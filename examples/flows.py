"""Flows: a chain (each step given the result before it) and a group with a callback (given
every result, in order), one of whose members runs on another queue.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/flows.py
"""

from __future__ import annotations

import asyncio
import os

from echomq import App, AppWorker, chain, group

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="flows-demo")


@app.task()
async def download(url: str) -> str:
    return f"<page of {url}>"


@app.task()
async def parse(page: str) -> int:  # a chain link: its first parameter gets the page
    return len(page)


@app.task()
async def label(size: int, unit: str) -> str:  # `unit` is bound by receiving(unit=...)
    return f"{size} {unit}"


@app.task(queue="flows-demo-media")  # another queue: on a cluster, most likely another shard
async def thumbnail(image: str) -> int:
    return len(image) * 100


@app.task()
async def total(sizes: list[int]) -> int:  # the group's callback: every result, in order
    return sum(sizes)


async def main() -> None:
    async with app:
        steps = chain(download.call("example.com"), parse, label.receiving(unit="chars"))
        pipeline = await steps.enqueue()
        images = [thumbnail.call("a.png"), thumbnail.call("bb.png"), parse.call("local")]
        fan_in = await group(images, then=total).enqueue()
        print("flow ids:", len(pipeline.ids.ids), "and", len(fan_in.ids.ids))
        await AppWorker(app).run_until_idle()  # serves flows-demo and flows-demo-media
        print("chain:", await pipeline.result(timeout=10))
        print("group:", await fan_in.result(timeout=10))


if __name__ == "__main__":
    asyncio.run(main())

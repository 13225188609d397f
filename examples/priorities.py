"""Priority bands over fair lanes: nightly digests wait in band 1, the day's messages in the
default band 5, and an on-call page in band 9 goes out first, whichever tenant it is for.
Inside each band the tenants' lanes still take turns.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/priorities.py
"""

from __future__ import annotations

import asyncio
import os

from echomq import App, AppWorker, ConsumerOptions

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="priority-demo")
SENT: list[str] = []


@app.task(lane="tenant")
async def message(tenant: str, text: str) -> None:
    SENT.append(f"{tenant}: {text}")


@app.task(lane="tenant", priority=1)  # every digest waits for the more urgent bands
async def digest(tenant: str, day: int) -> None:
    SENT.append(f"{tenant}: digest {day}")


async def main() -> None:
    async with app:
        await app.enqueue_many(
            [digest.call(tenant, day) for tenant in ("acme", "zen") for day in (1, 2)]
            + [message.call(tenant, "hello") for tenant in ("acme", "zen")]
        )
        await message.using(priority=9).enqueue("zen", "PAGE: the database is down")
        # One job at a time, so the order of service shows.
        await AppWorker(app, options=ConsumerOptions(concurrency=1)).run_until_idle()
    print("\n".join(SENT))


if __name__ == "__main__":
    asyncio.run(main())

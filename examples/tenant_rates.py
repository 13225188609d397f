"""Per-tenant rate limits shared by every worker: acme is held at 5 sends a second while the
other tenants' emails go out as fast as the workers can take them, on one queue.

The limit lives in the engine (a window per lane, spent inside the claim), so ten worker
processes on ten hosts still send acme's email at 5/s in all.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/tenant_rates.py
"""

from __future__ import annotations

import asyncio
import os
import time

from echomq import App, AppWorker

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="rates-demo")
SENT: dict[str, list[float]] = {}


@app.task(lane="tenant")
async def notify(tenant: str, n: int) -> None:
    SENT.setdefault(tenant, []).append(time.monotonic())


async def main() -> None:
    async with app:
        await app.queue("rates-demo").lane("acme").rate(5, 1.0)  # acme: 5 claims a second
        await app.enqueue_many(
            [notify.call("acme", n) for n in range(10)] + [notify.call("zen", n) for n in range(40)]
        )
        await AppWorker(app).run_until_idle()
    for tenant, times in sorted(SENT.items()):
        span = times[-1] - times[0]
        print(f"{tenant}: {len(times)} sent over {span:.2f} s")


if __name__ == "__main__":
    asyncio.run(main())

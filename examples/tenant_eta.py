"""Where a tenant stands: acme is held to 5 jobs a second and has 10 waiting, zen's lane is
paused. Each job and each lane answers its place and an estimate of its wait until a worker
claims it, with what sets that wait (docs/guides/where-a-tenant-stands.md).

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/tenant_eta.py
"""

from __future__ import annotations

import asyncio
import os

from echomq import App

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="eta-demo")


@app.task(lane="tenant")
async def report(tenant: str, n: int) -> None:
    print(f"report {n} for {tenant}")


async def main() -> None:
    async with app:
        queue = app.queue()
        await queue.lane("acme").rate(5, 1.0)
        handles = [await report.enqueue("acme", n) for n in range(10)]
        await report.enqueue("zen", 0)
        await queue.lane("zen").pause()
        place = await handles[-1].position()
        assert place is not None  # None once a worker claimed it
        print(f"acme's last job: {place.position} ahead, ~{place.seconds:.1f} s ({place.bound})")
        for tenant in ("acme", "zen"):
            eta = await queue.lane(tenant).eta()
            wait = "no estimate" if eta.seconds is None else f"~{eta.seconds:.1f} s"
            print(f"a new job for {tenant}: {eta.position} ahead, {wait} ({eta.bound})")
        await queue.drain()  # a demo: the next run starts from empty lanes


if __name__ == "__main__":
    asyncio.run(main())

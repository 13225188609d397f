"""From nothing to a tenant-fair worker with results: one lane per tenant, a heavy tenant's
burst that cannot starve the others, a paying tenant served 3:1, a ceiling on one tenant's jobs
in flight, and every result read back.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/fair_worker.py

docs/guides/fairness.md shows this file; tests/examples/test_examples.py runs it and checks the
order the lanes were served in.
"""

from __future__ import annotations

import asyncio
import os

from echomq import App, AppWorker, ConsumerOptions

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="fair-demo")
SERVED: list[str] = []


@app.task(lane="tenant")  # the lane is the tenant argument's value
async def render(tenant: str, page: int) -> str:
    SERVED.append(tenant)
    return f"{tenant}/page-{page}.pdf"


async def main() -> None:
    async with app:
        queue = app.queue("fair-demo")
        await queue.lane("gold").weight(3)  # up to 3 claims per visit of the ring
        await queue.lane("noisy").limit(2)  # at most 2 of noisy's jobs in flight at once
        # noisy floods first; gold and free arrive after its 20 jobs, and are served at once.
        calls = [render.call("noisy", n) for n in range(20)]
        calls += [render.call("gold", n) for n in range(6)]
        calls += [render.call("free", n) for n in range(2)]
        handles = await app.enqueue_many(calls)  # one pipelined batch, a verdict per call
        assert all(h.verdict.kind == "enqueued" for h in handles)
        # One job at a time, so the order shows the ring: noisy, gold ×3, free, noisy, …
        await AppWorker(app, options=ConsumerOptions(concurrency=1)).run_until_idle()
        print("served:", " ".join(SERVED[:12]))
        print("gold's results:", [await h.result(timeout=10) for h in handles[20:23]])
        print("last served:", SERVED[-1])


if __name__ == "__main__":
    asyncio.run(main())

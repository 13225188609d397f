"""Cooling a lane: the upstream answers 429 "retry after 1 s" for acme, so acme's lane sits out
that second on every worker while zen's webhooks keep going out; acme's refused jobs go back
without spending an attempt (retries=0: a spent attempt would bury them) and go out, in order,
once it ends. A job already in hand when the lane cooled still runs: refused too, it cools again.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/cooling.py
"""

from __future__ import annotations

import asyncio
import os
import time

from echomq import App, AppWorker, Cool

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="cooling-demo")
SENT: list[tuple[str, int, float]] = []
CLOSED_UNTIL: dict[str, float] = {}  # what the upstream remembers: acme is throttled until…


class TooManyRequests(Exception):
    """What an HTTP client raises on a 429, with the upstream's ``Retry-After`` in seconds."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"429: retry after {retry_after} s")
        self.retry_after = retry_after


async def post(tenant: str, n: int) -> None:
    """A stand-in for the upstream: it throttles acme for a second from its first call."""
    now = time.monotonic()
    if tenant == "acme":
        closed_until = CLOSED_UNTIL.setdefault(tenant, now + 1.0)
        if now < closed_until:
            raise TooManyRequests(retry_after=closed_until - now)


@app.task(lane="tenant", retries=0)
async def webhook(tenant: str, n: int) -> None:
    try:
        await post(tenant, n)
    except TooManyRequests as exc:
        # The whole tenant is throttled upstream, not this one call: cool its lane.
        raise Cool(exc.retry_after, str(exc)) from None
    SENT.append((tenant, n, time.monotonic()))


async def main() -> None:
    async with app:
        await app.enqueue_many(
            [webhook.call("acme", n) for n in range(2)] + [webhook.call("zen", n) for n in range(3)]
        )
        tallies = await AppWorker(app).run_until_idle()
    for tenant, n, at in SENT:
        print(f"{tenant} {n} {'after' if at >= CLOSED_UNTIL['acme'] else 'before'} the cool")
    print(f"cooled {tallies['cooling-demo'].cooled}, dead {tallies['cooling-demo'].dead}")


if __name__ == "__main__":
    asyncio.run(main())

"""Delayed and periodic jobs. Delays are seconds from now and times are Unix seconds (both on
the server's clock); a millisecond timestamp is refused, not read as a date 55,000 years out.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/scheduling.py

docs/guides/scheduling.md shows this file; tests/examples/test_examples.py runs it.
"""

from __future__ import annotations

import asyncio
import os
import time

from echomq import App, AppWorker, InvalidArgument

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="schedule-demo")


@app.task()
async def remind(text: str) -> str:
    return f"reminded: {text}"


# --8<-- [start:periodic]
@app.periodic(every=3600.0, missed="once", kwargs={"kind": "hourly"})  # seconds; no extra
async def report(kind: str) -> str:
    return f"{kind} report"


@app.periodic(cron="0 9 * * mon-fri", tz="Europe/Paris")  # the echomq[cron] extra
@app.task(timeout=60.0)  # a task's own options, stacked under the schedule
async def standup() -> str:
    return "good morning"


# --8<-- [end:periodic]


async def main() -> None:
    async with app:
        soon = await remind.using(delay=0.5).enqueue("in half a second")  # seconds from now
        later = await remind.using(at=time.time() + 86_400).enqueue("tomorrow")  # Unix seconds
        print(soon.verdict.kind, later.verdict.kind)  # scheduled scheduled
        try:
            await remind.using(at=time.time() * 1000).enqueue("ms by mistake")
        except InvalidArgument as refused:
            print("refused:", refused.argument, "-", refused.reason)
        await AppWorker(app).run_until_idle(scheduled_within=5.0)  # waits for the 0.5 s one
        status = await later.status()  # JobInfo, or None for a job with no row
        print(await soon.result(timeout=5), "|", "tomorrow's is", status and status.state)
        hourly = app.schedules["report"]
        tick = hourly.after(int(time.time() * 1000))  # the next tick, Unix ms (an explicit _ms)
        print("next report at", time.strftime("%H:%M", time.gmtime(tick / 1000)), "UTC")
        morning = app.schedules["standup"].after(int(time.time() * 1000))
        print("next standup", time.strftime("%a %H:%M", time.gmtime(morning / 1000)), "UTC")


if __name__ == "__main__":
    asyncio.run(main())

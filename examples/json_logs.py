"""JSON log lines from an application: ``echomq.logs.JsonFormatter`` on the root handler, a task
that logs with its own logger, and the lines it writes carrying the job's queue, lane, id and
attempt (a worker started with ``echomq worker --log-format json`` writes the same lines).

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/json_logs.py
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from echomq import App, AppWorker

# --8<-- [start:setup]
from echomq.logs import JsonFormatter

handler = logging.StreamHandler(sys.stdout)
handler.setFormatter(JsonFormatter())
logging.basicConfig(level=logging.INFO, handlers=[handler])
log = logging.getLogger("billing")

app = App(os.environ.get("ECHOMQ_URL"), queue="json-logs-example")


@app.task(lane="tenant")
async def charge(tenant: str, cents: int) -> int:
    log.info("charging %s: %d cents", tenant, cents)  # a line about this job: its fields
    return cents


# --8<-- [end:setup]


async def main() -> None:
    async with app:
        await charge.enqueue("acme", 1200)
        log.info("enqueued")  # a line about no job: no job fields
        await AppWorker(app).run_until_idle()


if __name__ == "__main__":
    asyncio.run(main())

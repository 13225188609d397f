"""An App the log tests run (``echomq worker log_app:app``): a task that logs with its own
logger, fails its first attempt with an error naming the server's URL (as a client library's
error might), and logs a dashboard link with its token on the second."""

from __future__ import annotations

import logging
import os

from echomq import App, context

app = App(queue="log-app")
log = logging.getLogger("log_app")


@app.task(lane="tenant", retries=1)
async def bill(tenant: str, amount: int) -> int:
    log.info("billing %s", tenant)
    if context().attempt == 1:
        raise ConnectionError(f"could not reach {context().app.url}")
    token = os.environ["ECHOMQ_DASHBOARD_TOKEN"]
    log.info("see http://127.0.0.1:8700/?token=%s", token)
    return amount

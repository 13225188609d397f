"""Two workers of one app in one process, each giving its tasks their own dependencies, on a
connection the application already holds (its pool and its id minter, lent to the app).

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/workers_in_one_process.py

docs/guides/tasks.md shows this file; tests/examples/test_examples.py runs it.
"""

from __future__ import annotations

import asyncio
import os

from echomq import App, AppWorker, ConnectionOptions, context
from echomq.engine import Minter
from echomq.wire import Pool


async def main() -> None:
    url = os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379")
    pool = await Pool(ConnectionOptions.from_url(url), 2).connect()  # the application's own
    minter = Minter.leased(pool)  # one id node for every id this process mints
    await minter.ready()
    app = App(queue="sms-demo", wire=pool, minter=minter)

    @app.task(queue="sms-demo")
    async def sms(to: str) -> str:
        return f"{context().state['gateway']} texted {to}"

    @app.task(queue="mail-demo")
    async def mail(to: str) -> str:
        return f"{context().state['gateway']} mailed {to}"

    texted = await sms.enqueue("+44 20 7946 0000")
    mailed = await mail.enqueue("ada@example.com")
    workers = [  # each with the dependencies of its own queue's tasks
        AppWorker(app, ["sms-demo"], state={"gateway": "the SMS gateway"}),
        AppWorker(app, ["mail-demo"], state={"gateway": "the mail relay"}),
    ]
    await asyncio.gather(*(worker.run_until_idle() for worker in workers))
    print(await texted.result(timeout=5))
    print(await mailed.result(timeout=5))
    await app.close()  # the app's queues; the pool and the minter stay the application's
    print("the pool still answers:", await pool.call("PING") == b"PONG")
    await minter.release()
    await pool.close()


if __name__ == "__main__":
    asyncio.run(main())

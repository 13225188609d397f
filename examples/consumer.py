"""A raw consumer (no task layer): a handler that completes, asks for a retry, or drops a job,
run by a ``Consumer`` until every job it was given has finished.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/consumer.py

docs/guides/consumers.md shows this file; tests/examples/test_examples.py runs it.
"""

from __future__ import annotations

import asyncio
import os

# --8<-- [start:consumer]
from echomq import Consumer, ConsumerOptions, Drop, Exponential, Jitter, Job, Queue, Retry

URL = os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379")
SENT: list[str] = []


async def send_email(job: Job) -> None:
    if job.payload.get("bounce"):
        raise Drop("address bounced")  # dead-letter at once, no more attempts
    if job.payload.get("flaky") and job.attempts == 1:
        raise Retry(after=0.2)  # ask for this delay (seconds); it counts as an attempt
    SENT.append(job.payload["to"])  # … deliver here; raising anything else is a failed attempt


async def main() -> None:
    queue = await Queue.connect(URL, "consumer-demo")
    options = ConsumerOptions(
        concurrency=50,  # jobs in hand at once
        lease=30.0,  # seconds a claim holds a job before it may be reaped
        max_attempts=5,
        backoff=Jitter(Exponential(1.0, 60.0)),  # seconds; computed host-side
    )
    consumer = Consumer(queue, send_email, options)
    running = asyncio.create_task(consumer.run())  # until consumer.stop()
    verdicts = [
        await queue.enqueue({"to": "a@acme.test"}, lane="acme"),
        await queue.enqueue({"to": "b@acme.test", "flaky": True}, lane="acme"),
        await queue.enqueue({"to": "c@zen.test", "bounce": True}, lane="zen"),
    ]
    # Each wait ends once its job is dead, or its row is gone (completed, not kept).
    await asyncio.gather(*(queue.wait(v.id, timeout=30) for v in verdicts))
    consumer.stop()  # claims nothing more; the jobs in hand finish
    tally = await running
    print(f"sent {sorted(SENT)}")
    print(f"completed {tally.completed} retried {tally.retried} dead {tally.dead}")
    print(f"dead letter: {[(info.lane, info.last_error) for info in await queue.dead(10)]}")
    await queue.close()


# --8<-- [end:consumer]


if __name__ == "__main__":
    asyncio.run(main())

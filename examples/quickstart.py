"""Getting started: one task, a worker, a result (docs/getting-started.md shows this file).

    python -m echomq.server &          # a Valkey on 127.0.0.1:6379
    echomq worker quickstart:app &     # run from this folder: it imports quickstart
    python quickstart.py               # → enqueued hello, ada

tests/examples/test_examples.py runs it the same way, with a real ``echomq worker`` process.
"""

from __future__ import annotations

# --8<-- [start:app]
import asyncio
import os

from echomq import App

app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="quickstart")


@app.task(lane="tenant", retries=2, timeout=10.0)  # each tenant's jobs ride their own lane
async def greet(tenant: str, name: str) -> str:
    return f"hello, {name}"


async def main() -> None:
    async with app:
        handle = await greet.enqueue("acme", "ada")  # checked against the signature, then sent
        print(handle.verdict.kind, await handle.result(timeout=30))  # waits, no polling


if __name__ == "__main__":  # the worker imports this module: only `python quickstart.py` runs it
    asyncio.run(main())
# --8<-- [end:app]

"""Batch tasks: signups enqueued one by one are inserted into SQLite in batches of up to 50,
one transaction per batch; a bad member is dead-lettered alone, its batch-mates are inserted.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/batch_tasks.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from dataclasses import dataclass

from echomq import App, AppWorker, Batching, Member, TaskFailed
from echomq.tasks import MemberVerdict

# A batch task has a queue of its own: the worker gathers that queue's jobs into batches.
app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="batch-demo")
sizes: list[int] = []


@dataclass(frozen=True)
class Signup:
    email: str
    name: str


@app.task(batch=Batching(max_size=50, max_wait=2.0, min_size=10), retries=2)
async def insert_signups(members: list[Member[Signup]]) -> list[MemberVerdict[int]]:
    """Insert a batch of signups; each member's result is its row id."""
    sizes.append(len(members))
    db: sqlite3.Connection = app.state["db"]
    good = [m for m in members if "@" in m.item.email]
    with db:  # one transaction; the job id is the key, so a batch run twice inserts once
        db.executemany(
            "INSERT OR IGNORE INTO signups (job, email, name) VALUES (?, ?, ?)",
            [(m.id, m.item.email, m.item.name) for m in good],
        )
    ids = json.dumps([m.id for m in good])
    query = "SELECT job, rowid FROM signups WHERE job IN (SELECT value FROM json_each(?))"
    rows: dict[str, int] = dict(db.execute(query, (ids,)))
    return [
        m.done(rows[m.id]) if m.id in rows else m.dead(f"bad email {m.item.email!r}")
        for m in members
    ]


async def main() -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE signups (job TEXT PRIMARY KEY, email TEXT, name TEXT)")
    app.state["db"] = db  # a real worker opens it in an @app.on_startup hook
    async with app:
        people = [Signup(f"user{i}@example.test", f"User {i}") for i in range(120)]
        people[7] = Signup("nobody", "No Body")
        handles = await app.enqueue_many(insert_signups.call(p) for p in people)
        await AppWorker(app).run_until_idle()
        print("batches:", sizes)
        print("rows:", db.execute("SELECT count(*) FROM signups").fetchone()[0])
        print("first signup: row", await handles[0].result(timeout=5))
        try:
            await handles[7].result(timeout=5)
        except TaskFailed as failed:
            print("signup 7:", failed.error)
    db.close()


if __name__ == "__main__":
    asyncio.run(main())

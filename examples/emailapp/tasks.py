"""The app's tasks: one echomq App, two tasks on one queue, each tenant on its own lane.

Run a worker for them from this folder's parent: ``echomq worker emailapp.tasks:app``.
"""

from __future__ import annotations

import os

from echomq import App, Exponential, Policy, context

# Applications read their settings once, at start-up; the library never reads the environment.
app = App(os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379"), queue="email")

# --8<-- [start:lanes]
# Every tenant at most 10 emails a second; acme (its provider allows 5 a second) 5 a second and
# 2 at once; globex, a paying tenant, 3 claims per ring visit. Declared here, at import: every
# process applies them when it connects (the web app's lifespan, each worker's start), and
# applying the policies in force again changes nothing, so a deploy grants no fresh budget.
app.lanes(
    default=Policy(rate=(10, 1.0)),
    acme=Policy(rate=(5, 1.0), limit=2),
    globex=Policy(weight=3),
)
# --8<-- [end:lanes]

#: What the tasks "sent" in this process (a real app would call its mail provider).
OUTBOX: list[dict[str, str]] = []


@app.task(lane="tenant", retries=4, backoff=Exponential(1.0, 60.0), timeout=10.0)
async def send_email(tenant: str, to: str, subject: str) -> dict[str, str]:
    """Send one email; the tenant's lane keeps one tenant's burst from delaying the others."""
    message = {"tenant": tenant, "to": to, "subject": subject}
    OUTBOX.append(message)
    return {"accepted": to, "attempt": str(context().attempt)}


@app.task(lane="tenant", dedup=lambda tenant, user: f"welcome:{tenant}:{user}", dedup_ttl=86400)
async def welcome(tenant: str, user: str) -> str:
    """Welcome a user once a day at most: a second enqueue is a ``duplicate`` verdict."""
    await send_email.enqueue(tenant, user, "Welcome!")
    return f"welcomed {user}"

"""The blocking producer, ``SyncQueue``: what Django views, Flask handlers and scripts use to
enqueue with no event loop (docs/guides/django.md shows this file).

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/sync_queue.py
"""

from __future__ import annotations

import os
import time

from echomq import Item, SyncQueue

URL = os.environ.get("ECHOMQ_URL", "valkey://127.0.0.1:6379")

# --8<-- [start:sync]
with SyncQueue.connect(URL, "sync-demo") as queue:
    verdict = queue.enqueue({"to": "a@acme.test"}, lane="acme", dedup_key="receipt-17")
    again = queue.enqueue({"to": "a@acme.test"}, lane="acme", dedup_key="receipt-17")
    later = queue.enqueue_in(30.0, {"to": "b@acme.test"}, lane="acme")  # seconds from now
    tomorrow = queue.enqueue_at(time.time() + 86_400, {"to": "c@acme.test"})  # Unix seconds
    verdicts = queue.enqueue_many([Item({"n": n}, lane="zen") for n in range(500)])
    queue.configure_lane("acme", limit=2, rate=(5, 1.0))  # a ceiling of 2, 5 claims per 1 s
    print(verdict.kind, again.kind, later.kind, tomorrow.kind, len(verdicts))
    print(queue.state(verdict.id), queue.state(later.id))  # pending scheduled
    print(queue.wait(verdict.id, timeout=0.1))  # JobInfo once completed or dead; None here
# --8<-- [end:sync]

"""A Django/Flask-style producer: plain blocking code, no event loop, in a pre-forking server.

The task module is imported (and the producer's connection made) before the server forks its
workers, as gunicorn does with ``--preload``; each child still enqueues safely: the producer
notices the fork and opens its own connection and id node in the child.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/sync_producer.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # so `emailapp` imports when run as a script

from emailapp.tasks import send_email

WORKERS = 2
REQUESTS = 50


def view(tenant: str, to: str) -> str:
    """What a Django view would do: enqueue and answer with the job id."""
    handle = send_email.enqueue_sync(tenant, to, "Your receipt")
    assert handle.verdict.ok, handle.verdict
    return handle.id


def status_view(job_id: str) -> str:
    """And a view that reads a job's state by its id, as a status page would."""
    status = send_email.handle_sync(job_id).status()
    return "unknown" if status is None else status.state


def main() -> None:
    first = view("acme", "boss@acme.test")  # the parent uses the producer before forking
    assert status_view(first) == "pending"
    children = []
    for worker in range(WORKERS):
        pid = os.fork()
        if pid == 0:  # a pre-forked server process serving its requests
            ids = [view(f"tenant-{worker}", f"user{n}@example.test") for n in range(REQUESTS)]
            print(f"worker {worker}: enqueued {len(set(ids))} emails", flush=True)
            os._exit(0)
        children.append(pid)
    statuses = [os.waitpid(pid, 0)[1] for pid in children]
    assert all(status == 0 for status in statuses), statuses
    print(f"parent: enqueued {first}; {WORKERS} workers done", flush=True)


if __name__ == "__main__":
    main()

"""Django views that enqueue with the sync producer: a one-file Django project, driven by
Django's own test client (a real request through the URL resolver, the view and the response).

The views call ``send_email.enqueue_sync`` and ``handle_sync(...).status()``: no event loop, no
``async_to_sync``. A worker (``echomq worker emailapp.tasks:app``) runs the tasks; here one runs
inline at the end, so the status view can show the job completed with its result.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/django_views.py
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from pathlib import Path

import django
from django.conf import settings

sys.path.insert(0, str(Path(__file__).parent))  # so `emailapp` imports when run as a script

# --8<-- [start:views]
from django.http import HttpRequest, JsonResponse
from django.urls import path

from echomq import InvalidArgument
from emailapp.tasks import send_email


def send(request: HttpRequest, tenant: str) -> JsonResponse:
    """POST /tenants/<tenant>/emails {"to", "subject"}: 202 with the job's id and verdict."""
    if request.method != "POST":
        return JsonResponse({"error": "POST only"}, status=405)
    body = json.loads(request.body)
    handle = send_email.enqueue_sync(tenant, body["to"], body["subject"])
    return JsonResponse({"job": handle.id, "verdict": handle.verdict.kind}, status=202)


def job_status(request: HttpRequest, job: str) -> JsonResponse:
    """GET /jobs/<job>: the job's state, and its result once completed."""
    try:
        status = send_email.handle_sync(job).status()
    except InvalidArgument as refused:  # not a job id at all: the client's mistake
        return JsonResponse({"error": str(refused)}, status=400)
    if status is None:
        return JsonResponse({"state": "unknown"}, status=404)
    return JsonResponse({"state": status.state, "result": status.result})


urlpatterns = [
    path("tenants/<str:tenant>/emails", send),
    path("jobs/<str:job>", job_status),
]
# --8<-- [end:views]


def configure() -> None:
    """The settings a real project keeps in settings.py; the secret from the environment."""
    settings.configure(
        ROOT_URLCONF=__name__,
        SECRET_KEY=os.environ.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(32),
        ALLOWED_HOSTS=["testserver", "127.0.0.1", "localhost"],
        INSTALLED_APPS=[],
        MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    )
    django.setup()


def main() -> None:
    from django.test import Client

    from echomq import AppWorker

    client = Client()
    sent = client.post(
        "/tenants/acme/emails",
        data=json.dumps({"to": "ceo@acme.test", "subject": "Invoice"}),
        content_type="application/json",
    )
    job = sent.json()["job"]
    print("POST", sent.status_code, sent.json()["verdict"])
    print("GET before the worker:", client.get(f"/jobs/{job}").json()["state"])
    asyncio.run(AppWorker(send_email.app).run_until_idle())  # `echomq worker`, in miniature
    print("GET after the worker:", client.get(f"/jobs/{job}").json())
    refused = client.get("/jobs/not-a-job")
    print("GET a malformed id:", refused.status_code, refused.json()["error"])


if __name__ == "__main__":
    configure()
    main()

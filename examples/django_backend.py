"""The shop, driven through Django's test client: three views enqueue tasks (one through an
async view's ``aenqueue``), a real ``echomq worker`` runs them, and the results are read back
through Django's task result API.

    ECHOMQ_URL=valkey://127.0.0.1:6379 python examples/django_backend.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent  # examples/
sys.path.insert(0, str(HERE))  # so `shop` imports when run as a script
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")


def main() -> None:
    import django

    django.setup()
    from django.test import Client

    client = Client()
    sent = client.post(
        "/shops/acme/checkout", data=json.dumps({"prices": [3, 4]}), content_type="application/json"
    )
    checkout = sent.json()["id"]
    receipt = client.post("/shops/acme/orders/7/receipt").json()["id"]
    refund = client.post("/shops/zen/orders/8/refund").json()["id"]
    print("POST", sent.status_code, sent.json()["status"])
    print("before the worker:", client.get(f"/results/total/{checkout}").json())
    # --8<-- [start:worker]
    # What runs next to the web server (here: until the queues are drained).
    subprocess.run(
        [sys.executable, "-m", "echomq", "worker", "echomq.contrib.django:app", "--burst"],
        cwd=HERE,  # the worker imports `shop` from the folder it runs in
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "shop.settings"},
        check=True,
    )
    # --8<-- [end:worker]
    print("total:", client.get(f"/results/total/{checkout}").json())
    print("receipt:", client.get(f"/results/send_receipt/{receipt}").json())
    print("refund:", client.get(f"/results/refund/{refund}").json())
    print("ids:", checkout, receipt, refund)


if __name__ == "__main__":
    main()

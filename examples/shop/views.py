"""Views that enqueue the shop's tasks and read their results through Django's task API."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, JsonResponse
from django_tasks.base import Task, TaskResult
from django_tasks.exceptions import TaskResultDoesNotExist

from shop.tasks import refund, send_receipt, total

# --8<-- [start:views]
READERS: dict[str, Task[..., Any]] = {
    "total": total,
    "send_receipt": send_receipt,
    "refund": refund,
}


def checkout(request: HttpRequest, tenant: str) -> JsonResponse:
    """POST /shops/<tenant>/checkout {"prices": [...]}: 202 with the task result's id."""
    prices = json.loads(request.body)["prices"]
    result = total.enqueue(prices, tenant=tenant)
    return JsonResponse({"id": result.id, "status": result.status}, status=202)


async def receipt(request: HttpRequest, tenant: str, order: int) -> JsonResponse:
    """An async view: ``aenqueue``."""
    result = await send_receipt.aenqueue(order, "ceo@acme.test", tenant=tenant)
    return JsonResponse({"id": result.id, "status": result.status}, status=202)


def refund_order(request: HttpRequest, tenant: str, order: int) -> JsonResponse:
    result = refund.enqueue(order, tenant=tenant)
    return JsonResponse({"id": result.id, "status": result.status}, status=202)


def outcome(request: HttpRequest, task: str, id: str) -> JsonResponse:
    """GET /results/<task>/<id>: the status, and the return value or the error."""
    try:
        result: TaskResult[Any] = READERS[task].get_result(id)
    except TaskResultDoesNotExist:
        return JsonResponse({"status": "unknown"}, status=404)
    shown: dict[str, object] = {"status": result.status, "attempts": result.attempts}
    if result.status == "SUCCESSFUL":
        shown["value"] = result.return_value
    if result.errors:
        shown["error"] = result.errors[-1].exception_class_path
    return JsonResponse(shown)


# --8<-- [end:views]

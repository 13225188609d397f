"""The shop's tasks: plain Django ``@task`` functions, sync or async; echomq runs them."""

from __future__ import annotations

# Django 6: `from django.tasks import task`; on Django 5.2 the backport (the `django` extra).
from django_tasks import task


# --8<-- [start:tasks]
@task
def total(prices: list[int], *, tenant: str) -> dict[str, object]:
    """Blocking code is fine: the worker runs it in a thread."""
    return {"tenant": tenant, "total": sum(prices)}


@task(queue_name="emails")
async def send_receipt(order: int, to: str, *, tenant: str) -> str:
    return f"receipt {order} sent to {to}"


@task
def refund(order: int, *, tenant: str) -> None:
    raise LookupError(f"no payment for order {order}")


# --8<-- [end:tasks]

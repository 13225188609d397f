"""Django tasks for test_django_backend.py (a task must be a module-level function)."""

from __future__ import annotations

from django_tasks import TaskContext, task


class Broken(Exception):
    pass


@task
def add(a: int, b: int, *, tenant: str = "") -> int:
    return a + b


@task(takes_context=True)
def whoami(context: TaskContext, *, tenant: str) -> list[object]:
    return [context.task_result.id, context.attempt, tenant]


@task(queue_name="other")
async def shout(word: str) -> str:
    return word.upper()


@task
def broken(order: int) -> None:
    raise Broken(f"order {order}")

"""echomq.contrib.django.EchoMQBackend held to Django's task backend contract (the django-tasks
backport on Django 5.2): enqueue/aenqueue, get_result/aget_result/refresh, takes_context,
queue names mapped to echomq queues, lanes from a keyword, run_after scheduled, priority
mapped to echomq's bands, retries, failures with their exception's path, refusals; the worker
in-process."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import django
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test.utils import override_settings
from django_tasks import TaskResultStatus, task_backends
from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist

from echomq import App, AppWorker, ConsumerOptions, Fixed, Job, Queue
from echomq.contrib.django import EchoMQBackend, worker_app
from echomq.contrib.django._backend import echomq_priority
from echomq.testing import discard

if not settings.configured:  # this process's Django: no other test configures one
    settings.configure(INSTALLED_APPS=["django_tasks"], USE_TZ=True)
    django.setup()

BACKEND = "echomq.contrib.django.EchoMQBackend"


def tasks_setting(url: str, queue: str, /, **options: Any) -> dict[str, Any]:
    return {
        "default": {
            "BACKEND": BACKEND,
            "QUEUES": ["default", "other"],
            "OPTIONS": {
                "url": url,
                "queue": queue,
                "queues": {"other": f"{queue}-other"},
                "lane_kwarg": "tenant",
                "retries": 1,
                **options,
            },
        }
    }


@pytest.fixture
def backend(valkey_url: str, queue_name: str) -> Iterator[EchoMQBackend]:
    with override_settings(TASKS=tasks_setting(valkey_url, queue_name)):
        found = task_backends["default"]
        assert isinstance(found, EchoMQBackend)
        try:
            yield found
        finally:
            asyncio.run(forget(found.app, [queue_name, f"{queue_name}-other"]))


async def forget(app: App, names: list[str]) -> None:
    await app.connect()
    for name in names:
        await discard(app.queue(name))
    await app.close()


def work(app: App) -> None:
    """``echomq worker`` in miniature: run the backend's App until its queues are drained."""

    async def drain() -> None:
        try:
            await AppWorker(
                app, options=ConsumerOptions(beat=0.1, backoff=Fixed(0))
            ).run_until_idle()
        finally:
            await app.close()

    asyncio.run(drain())


def test_a_task_runs_on_the_worker_and_its_result_is_read_back(
    backend: EchoMQBackend, queue_name: str
) -> None:
    from django_jobs import add, whoami

    before = datetime.now(UTC)
    result = add.enqueue(2, 3, tenant="acme")
    context = whoami.enqueue(tenant="zen")
    assert result.status == TaskResultStatus.READY
    queue, _, job = result.id.rpartition(":")
    assert queue == queue_name
    assert backend.app.sync_queue(queue).job(job).lane == "acme"  # the lane_kwarg's value
    result.refresh()
    assert (result.status, result.attempts, result.started_at) == ("READY", 0, None)
    assert worker_app() is backend.app
    work(backend.app)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert (result.return_value, result.attempts, result.errors) == (5, 1, [])
    assert result.enqueued_at is not None
    assert result.enqueued_at >= before - timedelta(seconds=1)
    assert result.started_at is not None
    assert result.finished_at is not None
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert (result.args, result.kwargs, result.backend) == ([2, 3], {"tenant": "acme"}, "default")
    again = asyncio.run(add.aget_result(result.id))
    assert (again.status, again.return_value) == ("SUCCESSFUL", 5)
    # takes_context: the task saw its own result's id and attempt
    assert whoami.get_result(context.id).return_value == [context.id, 1, "zen"]


def test_aenqueue_from_async_code_on_a_mapped_queue_name(
    backend: EchoMQBackend, queue_name: str
) -> None:
    from django_jobs import shout

    result = asyncio.run(shout.aenqueue("hi"))
    # aenqueue ran the backend in asgiref's thread: close what that thread's instance opened
    asyncio.run(sync_to_async(task_backends.close_all)())
    assert result.id.startswith(f"{queue_name}-other:")  # "other" -> its mapped echomq queue
    work(backend.app)
    assert shout.get_result(result.id).return_value == "HI"


def test_a_failing_task_is_retried_as_configured_then_failed_with_its_exception(
    backend: EchoMQBackend,
) -> None:
    from django_jobs import broken

    result = broken.enqueue(9)
    work(backend.app)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 2  # "retries": 1
    assert [e.exception_class_path for e in result.errors] == ["django_jobs.Broken"]
    assert "order 9" in result.errors[0].traceback
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018


def test_run_after_is_scheduled_and_priority_accepted_and_kept(backend: EchoMQBackend) -> None:
    from django_jobs import add

    later = add.using(run_after=datetime.now(UTC) + timedelta(hours=1), priority=10)
    result = later.enqueue(1, 1)
    queue, _, job = result.id.rpartition(":")
    assert backend.app.sync_queue(queue).job(job).state == "scheduled"
    work(backend.app)  # nothing due within the idle check's minute: not run
    found = add.get_result(result.id)
    assert (found.status, found.task.priority) == ("READY", 10)
    with pytest.raises(InvalidTaskError, match="priority"):
        add.using(priority=101)


def test_djangos_priorities_map_to_bands_in_order_keeping_the_default() -> None:
    assert [echomq_priority(p) for p in (-100, -81, -80, -21, -20, -1, 0)] == [0, 0, 1, 3, 4, 4, 5]
    assert [echomq_priority(p) for p in (1, 25, 26, 50, 51, 76, 100)] == [6, 6, 7, 7, 8, 9, 9]


def test_a_more_urgent_django_task_is_served_first(
    backend: EchoMQBackend, valkey_url: str, queue_name: str
) -> None:
    from django_jobs import add

    add.using(priority=-50).enqueue(1, 1)
    add.enqueue(2, 2)
    add.using(priority=60).enqueue(3, 3)

    async def order() -> list[int]:
        queue = await Queue.connect(valkey_url, queue_name, events=False)
        try:
            jobs = [await queue.claim() for _ in range(3)]
            return [job.payload["args"]["args"][0] for job in jobs if isinstance(job, Job)]
        finally:
            await queue.close()

    assert asyncio.run(order()) == [3, 2, 1]


def test_unknown_ids_and_bad_arguments_are_refused_before_any_write(
    backend: EchoMQBackend, queue_name: str
) -> None:
    from django_jobs import add

    for unknown in ("nope", f"{queue_name}:not-a-job", "bad queue!:JOB0Sc78j8o14q"):
        with pytest.raises(TaskResultDoesNotExist):
            add.get_result(unknown)
    raw = backend.app.sync_queue(queue_name).enqueue({"not": "a Django task"}).id
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result(f"{queue_name}:{raw}")  # another producer's job on the same queue
    absent = add.enqueue(1, 2).id.rpartition(":")[2]
    with pytest.raises(TaskResultDoesNotExist):
        add.get_result(f"{queue_name}-other:{absent}")  # the right id on another queue
    with pytest.raises(ValueError, match="args"):
        add.enqueue(object(), 1)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"colour": "red"}, "unknown option 'colour'"),
        ({"retries": -1}, "retries"),
        ({"queue": "no spaces"}, "queue"),
        ({"queues": ["a"]}, "queues"),
        ({"lane_kwarg": 3}, "lane_kwarg"),
    ],
)
def test_options_are_checked_when_the_backend_is_made(
    valkey_url: str, options: dict[str, Any], named: str
) -> None:
    setting = tasks_setting(valkey_url, "checked", **options)
    with override_settings(TASKS=setting), pytest.raises(ImproperlyConfigured, match=named):
        task_backends["default"]

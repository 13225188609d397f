"""The task backend: a Django task's call becomes an echomq job of a runner task (one per echomq
queue) whose arguments are the task's import path and its JSON arguments; the worker imports
the task and calls it; a result is read from the job's row (its kept result, or its error)."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from inspect import iscoroutinefunction
from typing import TYPE_CHECKING, Any, TypeVar, cast

from echomq._extras import missing

try:
    from asgiref.sync import sync_to_async
    from django.core.exceptions import ImproperlyConfigured
    from django.db import close_old_connections
    from django.utils.module_loading import import_string
except ImportError as exc:  # the `django` extra
    raise ImportError(missing("django", "echomq.contrib.django")) from exc

from echomq.engine.ids import is_valid, unix_ms
from echomq.engine.keys import Keyspace
from echomq.engine.options import PRIORITY_DEFAULT
from echomq.engine.results import JobInfo
from echomq.errors import InvalidArgument
from echomq.tasks.app import App
from echomq.tasks.context import context
from echomq.tasks.task import Task as EchoTask

if TYPE_CHECKING:
    from django_tasks import TaskContext, TaskResult, TaskResultStatus
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from typing_extensions import ParamSpec
else:
    try:  # Django 6 ships the framework
        from django.tasks import TaskContext, TaskResult, TaskResultStatus
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import Task, TaskError
        from django.tasks.exceptions import TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
    except ImportError:  # Django 5.2: the reference backport (the `django` extra)
        try:
            from django_tasks import TaskContext, TaskResult, TaskResultStatus
            from django_tasks.backends.base import BaseTaskBackend
            from django_tasks.base import Task, TaskError
            from django_tasks.exceptions import TaskResultDoesNotExist
            from django_tasks.signals import task_enqueued, task_finished, task_started
        except ImportError as exc:
            raise ImportError(missing("django", "echomq.contrib.django")) from exc
    from typing import ParamSpec

T = TypeVar("T")
P = ParamSpec("P")

#: The OPTIONS a backend takes (anything else is refused, naming it).
OPTIONS = frozenset({"url", "queue", "queues", "lane_kwarg", "retries", "result_ttl"})
#: Django's READY covers a job waiting to run or to run again.
_STATUS = {
    "pending": "READY",
    "scheduled": "READY",
    "waiting": "READY",
    "active": "RUNNING",
    "completed": "SUCCESSFUL",
    "dead": "FAILED",
    "cancelled": "FAILED",
}


def _status(name: str) -> TaskResultStatus:
    """Django's status by name (a TextChoices, which the type checker sees as a tuple)."""
    return cast("TaskResultStatus", getattr(TaskResultStatus, name))


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _moment(unix_seconds: float | None) -> datetime | None:
    return None if unix_seconds is None else datetime.fromtimestamp(unix_seconds, UTC)


def _is_django_job(info: JobInfo) -> bool:
    payload = info.payload
    return (
        isinstance(payload, dict)
        and str(payload.get("task", "")).startswith("django:")
        and isinstance(payload.get("args"), dict)
        and isinstance(payload["args"].get("path"), str)
    )


def _exception_path(info: JobInfo) -> str:
    """The raised exception's import path, from the last line of the kept traceback (as
    ``traceback`` prints it: ``module.Name: message``, builtins without a module)."""
    text = (info.traceback or info.last_error or "").strip()
    last = text.splitlines()[-1] if text else "Exception"
    name = last.split(":", 1)[0].strip() or "Exception"
    return name if "." in name else f"builtins.{name}"


def echomq_priority(priority: int) -> int:
    """Django's task priority (-100..100, 0 the default, higher first) as echomq's band (0..9, 5
    the default): 0 is 5; 1..25 is 6, 26..50 is 7, 51..75 is 8, 76..100 is 9; -1..-20 is 4,
    -21..-40 is 3, and so on down to -81..-100, 0. Monotone, and it keeps the sign: a task
    Django ranks above the default runs ahead of it, one below runs after."""
    if priority >= 0:
        return PRIORITY_DEFAULT + -(-priority // 25)
    return PRIORITY_DEFAULT - -(priority // 20)


class EchoMQBackend(BaseTaskBackend):
    """Runs Django tasks on echomq. OPTIONS (each optional):

    * ``url``: the server (default ``valkey://127.0.0.1:6379``).
    * ``queue``: the echomq queue of Django's ``default`` queue name (default ``"default"``);
      any other ``queue_name`` runs on the echomq queue of that name, unless ``queues``
      (``{"emails": "mail-out"}``) maps it.
    * ``lane_kwarg``: a keyword argument whose value is the job's lane (``"tenant"``:
      ``send.enqueue(to, tenant="acme")`` runs in lane ``acme``, each tenant its fair share).
    * ``retries``: failed attempts retried (default 0, as Django's own backends: none).
    * ``result_ttl``: seconds a finished task's result is kept (default one day).

    ``priority`` (Django's -100..100, default 0) maps to echomq's bands (0..9, default 5) by
    :func:`echomq_priority`: 0 stays the default band, a positive priority runs in a band above
    it and a negative one below, in order; it is kept on the result as given.
    A result's id is ``"<echomq queue>:<job id>"``.
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    # Django's range, mapped to echomq's bands (echomq_priority).
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        unknown = sorted(set(self.options) - OPTIONS)
        if unknown:
            raise ImproperlyConfigured(f"TASKS[{alias!r}] OPTIONS: unknown option {unknown[0]!r}")
        options = self.options
        try:
            self.default_queue = Keyspace(options.get("queue", "default")).queue
            mapped = options.get("queues", {})
            if not isinstance(mapped, dict):
                raise InvalidArgument("queues", mapped, "a dict of queue_name -> echomq queue")
            self.mapped = {str(k): Keyspace(v).queue for k, v in mapped.items()}
            self.lane_kwarg: str | None = options.get("lane_kwarg")
            if self.lane_kwarg is not None and not isinstance(self.lane_kwarg, str):
                raise InvalidArgument("lane_kwarg", self.lane_kwarg, "a keyword argument's name")
            retries = options.get("retries", 0)
            if type(retries) is not int or not 0 <= retries <= 100:
                raise InvalidArgument("retries", retries, "a whole number from 0 to 100")
            self.retries = retries
            self.app = App(
                options.get("url"),
                queue=self.default_queue,
                result_ttl=options.get("result_ttl", 86_400.0),
            )
        except InvalidArgument as refused:
            raise ImproperlyConfigured(f"TASKS[{alias!r}] OPTIONS: {refused}") from None
        self._runners: dict[str, EchoTask[Any, Any]] = {}
        for name in self.queues:
            self.runner(self.echomq_queue(name))

    # -- mapping -------------------------------------------------------------------------------

    def echomq_queue(self, queue_name: str) -> str:
        """The echomq queue a Django ``queue_name`` runs on."""
        if queue_name in self.mapped:
            return self.mapped[queue_name]
        return self.default_queue if queue_name == "default" else queue_name

    def runner(self, queue: str) -> EchoTask[Any, Any]:
        """The echomq task that runs Django tasks on ``queue`` (registered on first use)."""
        found = self._runners.get(queue)
        if found is None:
            found = self.app.task(f"django:{queue}", queue=queue, retries=self.retries)(self._run)
            self._runners[queue] = found
        return found

    # -- producing -----------------------------------------------------------------------------

    def enqueue(
        self,
        task: Task[P, T],
        args: P.args,  # type: ignore[valid-type]
        kwargs: P.kwargs,  # type: ignore[valid-type]
    ) -> TaskResult[T]:
        self.validate_task(task)
        queue = self.echomq_queue(task.queue_name)
        runner = self.runner(queue)
        lane = kwargs.get(self.lane_kwarg) if self.lane_kwarg is not None else None
        at = None if task.run_after is None else task.run_after.timestamp()
        priority = echomq_priority(task.priority)
        if lane is not None or at is not None or priority != PRIORITY_DEFAULT:
            runner = runner.using(
                lane=None if lane is None else str(lane), at=at, priority=priority
            )
        # Arguments that are no JSON, a bad lane: InvalidArgument (a ValueError), nothing written.
        handle = runner.enqueue_sync(
            task.module_path, list(args), dict(kwargs), task.queue_name, task.priority
        )
        result: TaskResult[T] = TaskResult(
            task=task,
            id=f"{queue}:{handle.id}",
            status=_status("READY"),
            enqueued_at=_moment(unix_ms(handle.id) / 1000),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    # -- results -------------------------------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult[Any]:
        queue, _, job = str(result_id).rpartition(":")
        try:
            Keyspace(queue)
        except InvalidArgument:
            raise TaskResultDoesNotExist(result_id) from None
        if not is_valid(job):
            raise TaskResultDoesNotExist(result_id)
        info = self.app.sync_queue(queue).job(job)
        if info is None or info.state == "absent" or not _is_django_job(info):
            raise TaskResultDoesNotExist(result_id)  # no job, or not one of a Django task
        arguments = info.payload["args"]
        task = self._task(arguments)
        status = _STATUS.get(info.state, "READY")
        envelope = info.result if isinstance(info.result, dict) else {}
        attempts = max(info.attempts, 1 if status in ("RUNNING", "SUCCESSFUL", "FAILED") else 0)
        worker = envelope.get("worker", "echomq")
        errors = []
        if status == "FAILED":
            errors.append(
                TaskError(
                    exception_class_path=_exception_path(info),
                    traceback=info.traceback or info.last_error or info.cancel or "cancelled",
                )
            )
        result: TaskResult[Any] = TaskResult(
            task=task,
            id=result_id,
            status=_status(status),
            enqueued_at=_moment(unix_ms(job) / 1000),
            started_at=_moment(envelope.get("started")),
            finished_at=_moment(info.finished),
            last_attempted_at=_moment(envelope.get("started")),
            args=arguments.get("args", []),
            kwargs=arguments.get("kwargs", {}),
            backend=self.alias,
            errors=errors,
            worker_ids=[worker] * attempts,
        )
        if status == "SUCCESSFUL":
            object.__setattr__(result, "_return_value", envelope.get("value"))
        return result

    def _task(self, arguments: dict[str, Any]) -> Task[Any, Any]:
        """The Django task a job runs, as it was enqueued (its queue name and priority)."""
        found = import_string(arguments["path"])
        if not isinstance(found, Task):
            raise TypeError(f"{arguments['path']} is not a Django task")
        return found.using(
            queue_name=arguments.get("queue_name", found.queue_name),
            priority=arguments.get("priority", found.priority),
        )

    def close(self) -> None:
        """Close the blocking sockets this backend opened (``task_backends.close_all()``)."""
        self.app.close_sync()

    # -- running (on the worker) ---------------------------------------------------------------

    async def _run(
        self,
        path: str,
        args: list[Any],
        kwargs: dict[str, Any],
        queue_name: str = "default",
        priority: int = 0,
    ) -> dict[str, Any]:
        """One attempt of a Django task: the result is kept as ``{"value", "worker",
        "started"}`` (Unix seconds), which :meth:`get_result` unwraps."""
        started = datetime.now(UTC)
        job = context().job
        task = self._task({"path": path, "queue_name": queue_name, "priority": priority})
        worker = _worker_id()
        result: TaskResult[Any] = TaskResult(
            task=task,
            id=f"{job.queue}:{job.id}",
            status=_status("RUNNING"),
            enqueued_at=_moment(unix_ms(job.id) / 1000),
            started_at=started,
            finished_at=None,
            last_attempted_at=started,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[worker] * job.attempts,
        )
        task_started.send(type(self), task_result=result)
        call = [TaskContext(task_result=result), *args] if task.takes_context else args
        try:
            if iscoroutinefunction(task.func):
                value = await task.func(*call, **kwargs)
            else:
                value = await sync_to_async(_in_thread, thread_sensitive=False)(
                    task.func, call, kwargs
                )
        except Exception:
            object.__setattr__(result, "status", _status("FAILED"))
            object.__setattr__(result, "finished_at", datetime.now(UTC))
            task_finished.send(type(self), task_result=result)
            raise
        object.__setattr__(result, "status", _status("SUCCESSFUL"))
        object.__setattr__(result, "finished_at", datetime.now(UTC))
        task_finished.send(type(self), task_result=result)
        return {"value": value, "worker": worker, "started": started.timestamp()}


def _in_thread(func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """A blocking task in a worker thread, with Django's connection hygiene around it (as a
    request has): a connection past its age or broken is not reused."""
    close_old_connections()
    try:
        return func(*args, **kwargs)
    finally:
        close_old_connections()


def worker_app(alias: str = "default") -> App:
    """The echomq App that ``echomq worker`` runs for the task backend ``alias``: its runner
    on the echomq queue of each of the backend's ``QUEUES``. For an alias other than
    ``default``, name it in a module of yours: ``app = worker_app("emails")``."""
    if TYPE_CHECKING:
        from django_tasks import task_backends
    else:
        try:
            from django.tasks import task_backends
        except ImportError:
            from django_tasks import task_backends
    backend = task_backends[alias]
    if not isinstance(backend, EchoMQBackend):
        raise InvalidArgument(
            "alias", alias, "its BACKEND is not echomq.contrib.django.EchoMQBackend"
        )
    if not backend.queues:
        raise InvalidArgument("alias", alias, "list the queues the worker serves in QUEUES")
    return backend.app

"""The worker side of an App: the
dispatcher that routes a queue's jobs to their tasks by name under each task's own retry policy,
and :class:`AppWorker`, one Consumer per queue on the app's one wire, able to run until idle."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from echomq.consumers.consumer import Consumer
from echomq.consumers.ledger import Observer, Outcome, Tally
from echomq.consumers.log_fields import job_fields
from echomq.consumers.options import ConsumerOptions, RetryPlan
from echomq.engine.checks import MAX_ATTEMPTS, ms
from echomq.engine.keys import Keyspace
from echomq.engine.results import Job
from echomq.errors import HookFailed, InvalidArgument
from echomq.tasks.app import App
from echomq.tasks.arguments import dump
from echomq.tasks.context import RUNNING
from echomq.tasks.execution import (
    PLAIN,
    TaskTimeout,
    UnknownTask,
    Unrunnable,
    error_text,
    execute,
    received,
)
from echomq.tasks.scheduler import Scheduler
from echomq.wire.url import redact_url

if TYPE_CHECKING:
    from echomq.consumers.batch import BatchConsumer
    from echomq.consumers.metronome import Metronome
    from echomq.engine.queue import Queue
    from echomq.tasks.task import Task

log = logging.getLogger("echomq.tasks")

#: A payload's missing ``args``: no arguments (one shared value, never written to).
_NO_ARGUMENTS: dict[str, Any] = {}


class Dispatcher:
    """The handler of every queue an AppWorker serves: the job's ``task`` field picks the
    function; :meth:`policy` says how a failed attempt goes on (the task's retries and backoff,
    else the consumer's)."""

    def __init__(self, app: App, options: ConsumerOptions, state: dict[str, Any]) -> None:
        self.app = app
        self.options = options
        self.state = state
        self.tasks = app.tasks  # the registry itself (one look-up less per job)

    async def __call__(self, job: Job) -> Any:
        payload = job.payload
        task = None
        if type(payload) is dict or isinstance(payload, dict):
            name = payload.get("task")
            if type(name) is str or isinstance(name, str):
                task = self.tasks.get(name)
        else:
            name = None
        if task is None:
            if not isinstance(name, str):
                raise Unrunnable("not a task")
            known = ", ".join(sorted(self.app.tasks)) or "none"
            log.error(
                "job %s: unknown task %s (this worker has: %s)",
                job.id, name, known, extra=job_fields(job),
            )  # fmt: skip
            raise UnknownTask(f"unknown task {name}")
        arguments = payload.get("args", _NO_ARGUMENTS)
        hooks = self.app.hooks  # read per job: a hook added meanwhile runs from the next
        if task.timeout is not None or hooks.before_job or hooks.after_job or payload.get("flow"):
            return await self._attempt(task, job, arguments)
        # execute()'s plain case run here, in the handler's own coroutine: no hooks, no timeout,
        # no flow (the commonest job) costs one coroutine, the task's, and no frame around it.
        signature = task.signature
        if type(arguments) is dict and signature.as_given and arguments.keys() == signature.names:
            args: Sequence[Any] = ()
            kwargs = arguments  # what load gives for it, without the call
        else:
            args, kwargs = self._load(task, arguments)  # before the context, as execute() has it
        # The Context is built only if the task asks (``context()``).
        token = RUNNING.set((job, task.name, self.state, self.app, None, None))
        try:
            result = await task.fn(*args, **kwargs)
        finally:
            RUNNING.reset(token)
        if result is None or type(result) in PLAIN:
            return result  # its own dump: no walk
        return dump(result, argument="result")

    async def _attempt(self, task: Task[Any, Any], job: Job, arguments: Any) -> Any:
        """An attempt with hooks, a timeout or a flow's children: :func:`execute`'s own."""
        children = None
        if job.payload.get("flow"):
            # A flow's parent: its children's results are read before it runs (one round trip).
            children = await self.app.queue(job.queue).children(job.id)
            arguments = received(arguments, job.payload.get("receive"), children)
        args, kwargs = self._load(task, arguments)
        # An asked-for Retry goes on under the task's own attempts (policy), as any failure.
        return await execute(self.app, task, job, args, kwargs, self.state, None, children)

    @staticmethod
    def _load(task: Task[Any, Any], arguments: Any) -> tuple[Sequence[Any], dict[str, Any]]:
        try:
            return task.signature.load(arguments)
        except InvalidArgument as exc:
            raise Unrunnable(f"bad arguments: {exc.reason}") from None  # no retry mends them

    def _task(self, job: Job) -> Task[Any, Any] | None:
        name = job.payload.get("task") if isinstance(job.payload, dict) else None
        return self.app.tasks.get(name) if isinstance(name, str) else None

    def _max_attempts(self, task: Task[Any, Any]) -> int:
        return task.max_attempts or self.options.max_attempts

    def policy(self, job: Job, exc: Exception) -> RetryPlan:
        """A failed attempt's error text, retry delay and max attempts, from its task; a
        timeout or an unrunnable job keeps no traceback (there is none worth reading)."""
        task = self._task(job)
        if isinstance(exc, UnknownTask):
            delay = self.options.backoff.delay(job.attempts)
            return RetryPlan(error_text(exc), delay, self.options.max_attempts, traceback=False)
        if task is None or isinstance(exc, Unrunnable):
            return RetryPlan(error_text(exc), 0.0, 1, traceback=False)
        backoff = task.backoff or self.options.backoff
        delay = backoff.delay(job.attempts)
        kept = not isinstance(exc, TaskTimeout)
        return RetryPlan(error_text(exc), delay, self._max_attempts(task), traceback=kept)


class _Watch:
    """The consumers' observer: wakes the idle check after every settle, and passes both
    calls on to the caller's observer."""

    def __init__(self, inner: Observer | None) -> None:
        self.inner = inner
        self.settled_event = asyncio.Event()

    def claimed(self, queue: str, jobs: Sequence[Job], lease_ms: int) -> None:
        if self.inner is not None:
            self.inner.claimed(queue, jobs, lease_ms)

    def settled(self, queue: str, job: Job, outcome: Outcome) -> None:
        self.settled_event.set()
        if self.inner is not None:
            self.inner.settled(queue, job, outcome)


class AppWorker:
    """Serves an App's tasks: one Consumer per queue (each with its own lanes and gates) on
    the app's one wire. ``queues`` narrows it (default: every queue the tasks use).

    ``state`` is the dict its tasks see as ``context().state`` and its startup hooks fill
    (default: the app's own ``app.state``): give each worker its own when one process runs
    several workers of one app with different dependencies (two bots, a stand-in in a test).
    ``metronome``: the :class:`Metronome` of the one queue this worker serves, shared with
    other workers of that queue in the process (one ``BLPOP`` and one upkeep per beat for the
    pool: docs/guides/consumers.md).
    """

    def __init__(
        self,
        app: App,
        queues: Iterable[str] | None = None,
        options: ConsumerOptions | None = None,
        *,
        observer: Observer | None = None,
        state: dict[str, Any] | None = None,
        metronome: Metronome | None = None,
    ) -> None:
        from echomq.consumers.metronome import Metronome

        if not isinstance(app, App):
            raise InvalidArgument("app", app, "expected an echomq.App")
        if state is not None and not isinstance(state, dict):
            raise InvalidArgument("state", state, "expected a dict")
        if options is not None and not isinstance(options, ConsumerOptions):
            raise InvalidArgument("options", options, "expected a ConsumerOptions")
        if metronome is not None and not isinstance(metronome, Metronome):
            raise InvalidArgument("metronome", metronome, "expected a Metronome")
        self.app = app
        self.state: dict[str, Any] = app.state if state is None else state
        if queues is not None and (isinstance(queues, str) or not isinstance(queues, Iterable)):
            # A str is iterable too: "default" would be seven queues of one letter each.
            raise InvalidArgument("queues", queues, "expected a list of queue names")
        named = list(queues) if queues is not None else app.queue_names()
        for name in named:
            Keyspace(name)  # each a str, before they are sorted (mixed types cannot be)
        self.queues = sorted(set(named))
        if not self.queues:
            raise InvalidArgument("queues", queues, "name at least one queue")
        if metronome is not None and self.queues != [metronome.queue.name]:
            raise InvalidArgument(
                "metronome", metronome.queue.name, f"serves another queue than {self.queues}"
            )
        self.metronome = metronome
        self.options = options or ConsumerOptions(concurrency=app.concurrency)
        # Each task's own policy decides when a job is dead: the consumer never buries first.
        self._consumer_options = dataclasses.replace(self.options, max_attempts=MAX_ATTEMPTS)
        self.consumers: dict[str, Consumer | BatchConsumer] = {}
        self._watch = _Watch(observer)
        self._is_stopping = False
        self._scheduled_within = 60.0
        self._scheduler: Scheduler | None = None
        #: Set once ``run`` connected, ran the startup hooks and started the consumers.
        self.ready = asyncio.Event()

    @property
    def tallies(self) -> dict[str, Tally]:
        """What each served queue's consumer did so far (empty until ``run`` starts them)."""
        return {name: consumer.tally for name, consumer in self.consumers.items()}

    def stop(self) -> None:
        """Claim nothing more; jobs in hand finish (up to ``stop_timeout``); ``run`` returns."""
        self._is_stopping = True
        if self._scheduler is not None:
            self._scheduler.stop()
        for consumer in self.consumers.values():
            consumer.stop()

    async def run(self) -> dict[str, Tally]:
        """Serve until :meth:`stop`; the tally of each queue."""
        return await self._serve(until_idle=False)

    async def run_until_idle(self, *, scheduled_within: float = 60.0) -> dict[str, Tally]:
        """Serve until no served queue has work left to get to: nothing in flight, nothing
        pending in a lane that is not paused, nothing scheduled to fall due within
        ``scheduled_within`` seconds (a retry's backoff is waited for; tomorrow's job is not)."""
        ms(scheduled_within, "scheduled_within")
        self._scheduled_within = float(scheduled_within)
        return await self._serve(until_idle=True)

    async def _serve(self, *, until_idle: bool) -> dict[str, Tally]:
        app = self.app
        await app.connect()
        try:
            # Inside the try: when startup hook 2 fails, the shutdown hooks still run, so what
            # hook 1 opened (a pool, a client) is closed.
            for hook in app.hooks.startup:
                try:
                    await hook(self.state)
                except Exception as exc:
                    raise HookFailed(_name(hook), exc) from exc
            queues = [await app.open_queue(name) for name in self.queues]
            dispatcher = Dispatcher(app, self.options, self.state)
            # Only the idle check needs every settle seen: a plain run hands the consumers the
            # caller's observer (or none), one call less per job.
            observer = self._watch if until_idle else self._watch.inner
            self.consumers = {q.name: self._consumer(q, dispatcher, observer) for q in queues}
            if self._is_stopping:
                self.stop()
            runs = [asyncio.ensure_future(c.run()) for c in self.consumers.values()]
            # Every worker process schedules (no leader): a tick's occurrence id is derived,
            # so the other schedulers' attempts are duplicates. Never pending work to the
            # idle check: run_until_idle does not wait for tomorrow's tick.
            scheduler = Scheduler(
                app, [s for s in app.schedules.values() if s.queue in self.queues]
            )
            self._scheduler = scheduler
            if not self._is_stopping:
                scheduler.start()
            self.ready.set()
            idle = asyncio.ensure_future(self._stop_when_idle(queues)) if until_idle else None
            try:
                await asyncio.gather(*runs)
            except BaseException:
                self.stop()  # one queue's consumer failed: the others stop too, then it raises
                await asyncio.gather(*runs, return_exceptions=True)
                raise
            finally:
                await scheduler.close()
                if idle is not None:
                    idle.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await idle
        finally:
            for hook in app.hooks.shutdown:
                try:
                    await hook(self.state)
                except Exception:
                    log.exception("shutdown hook %s failed", _name(hook))
        return self.tallies

    def _consumer(
        self, queue: Queue, dispatcher: Dispatcher, observer: Observer | None
    ) -> Consumer | BatchConsumer:
        """A batch task's queue is gathered in batches; any other queue's jobs run one by one."""
        from echomq.consumers.batch import BatchConsumer
        from echomq.tasks.batch_runner import BatchRunner, batch_task

        task = batch_task(self.app, queue.name)
        if task is not None:
            if self.metronome is not None:
                raise InvalidArgument("metronome", queue.name, "a batch task's queue takes none")
            run = BatchRunner(task, self.options)
            return BatchConsumer(queue, run, task.batching, self.options, observer=observer)
        return Consumer(
            queue,
            dispatcher,
            self._consumer_options,
            name=queue.name,
            observer=observer,
            policy=dispatcher.policy,
            metronome=self.metronome,
        )

    async def _stop_when_idle(self, queues: list[Queue]) -> None:
        # Checked when a settle leaves every consumer with nothing in hand (the last job's
        # settle is the moment a queue can drain); once a beat too, for work that ends
        # without a settle here (another process's job, a stalled job reaped dead).
        event = self._watch.settled_event
        while not self._is_stopping:
            event.clear()
            idle = all(c.in_flight == 0 for c in self.consumers.values())
            # Each queue's check is one atomic read (Queue.has_work): a job promoted, claimed
            # or deferred meanwhile is seen where it is, never between two places.
            if idle and await _drained(queues, self._scheduled_within):
                self.stop()
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), self.options.beat)


async def _when(event: asyncio.Event, call: Callable[[], None]) -> None:
    await event.wait()
    call()


async def _drained(queues: list[Queue], scheduled_within: float) -> bool:
    found = await asyncio.gather(*(q.has_work(scheduled_within) for q in queues))
    return not any(found)


def _schedules(app: App, queues: list[str]) -> str:
    names = sorted(s.name for s in app.schedules.values() if s.queue in queues)
    return f"; schedules {', '.join(names)}" if names else ""


def _name(hook: Any) -> str:
    return f"{getattr(hook, '__module__', '?')}:{getattr(hook, '__qualname__', hook)}"


async def serve_tasks(
    app: App,
    spec: str,
    queues: Iterable[str] | None = None,
    options: ConsumerOptions | None = None,
    *,
    burst: bool = False,
    on_ready: Callable[[], None] | None = None,
) -> dict[str, Tally]:
    """Run an AppWorker until SIGTERM/SIGINT (or, with ``burst``, until its queues drain).
    ``on_ready`` is called once the worker is connected, its startup hooks ran and its
    consumers started (the ``--processes`` supervisor learns so through a pipe)."""
    worker = AppWorker(app, queues, options)
    log.info(
        "echomq worker: app %s on %s; queues %s; tasks %s%s; concurrency %d%s",
        spec,
        redact_url(app.url),
        ", ".join(worker.queues),
        ", ".join(sorted(t.name for t in app.tasks.values() if t.queue in worker.queues)),
        _schedules(app, worker.queues),
        worker.options.concurrency,
        "; burst" if burst else "",
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop)
    announce = None if on_ready is None else asyncio.ensure_future(_when(worker.ready, on_ready))
    try:
        tallies = await (worker.run_until_idle() if burst else worker.run())
    finally:
        if announce is not None:
            announce.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        await app.close()
    for name, t in tallies.items():
        log.info(
            "%s: completed %d, retried %d, dead %d, lost leases %d",
            name, t.completed, t.retried, t.dead, t.lost,
        )  # fmt: skip
    return tallies

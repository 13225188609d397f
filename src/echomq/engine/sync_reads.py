"""The reads of a blocking queue by id and by lane: :class:`SyncReads`, mixed into
:class:`SyncQueue` (a job's row, state, log lines and place in its lane, a lane's estimated
wait, and ``wait`` for a job to finish, on a subscription of its own: ``sync_waiter.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from echomq.engine import ids as _ids
from echomq.engine.checks import MAX_DURATION, MAX_LIMIT, count, ms, text
from echomq.engine.eta import Eta, estimate
from echomq.engine.keys import Keyspace, validate_dedup, validate_group
from echomq.engine.producer import job_info, job_state
from echomq.engine.progress import LOG_KEEP
from echomq.engine.results import JobInfo, JobState
from echomq.engine.scripts import Script, ScriptRegistry
from echomq.engine.sync_process import SyncProcess
from echomq.engine.sync_waiter import SyncWaiter
from echomq.errors import ServerError
from echomq.wire.blocking import error_of, pack
from echomq.wire.codec import Codec


class SyncReads:
    """Reads on a blocking queue (mixed into :class:`SyncQueue`)."""

    keys: Keyspace
    codec: Codec
    scripts: ScriptRegistry
    _slot: int
    _done: str
    _here: Callable[[], SyncProcess]

    def _read(self, command: tuple[Any, ...]) -> Any:
        return self._call(pack(command))

    def _call(self, data: bytes, script: Script | None = None) -> Any:
        """One packed call on this queue's slot (``script``: loaded on ``NOSCRIPT``): its
        reply, its error reply raised."""
        reply = error_of(self._here().router.call(self._slot, data, script))
        if isinstance(reply, ServerError):
            raise reply
        return reply

    def job(self, id: str) -> JobInfo | None:
        """A job's row, or None when no such job exists."""
        job_id = _ids.validate(id, "JOB", "job id")
        return job_info(job_id, self._read(("HGETALL", self.keys.job(job_id))), self.codec)

    def dedup_job(self, key: str) -> str | None:
        """The id of the job dedup key ``key`` maps to now, or None (:meth:`Queue.dedup_job`)."""
        seen = self._read(("GET", self.keys.dedup(validate_dedup(key))))
        return None if seen is None else text(seen)

    def logs(self, id: str, limit: int = LOG_KEEP) -> list[str]:
        """The newest ``limit`` lines of a job's log, oldest first (:meth:`Queue.logs`)."""
        job_id = _ids.validate(id, "JOB", "job id")
        most = count(limit, "limit", maximum=MAX_LIMIT)
        return [text(line) for line in self._read(("LRANGE", self.keys.log(job_id), -most, -1))]

    def position(self, id: str) -> Eta | None:
        """:meth:`echomq.Queue.position`, blocking: where pending job ``id`` stands and its
        estimated wait; None when it waits in no lane."""
        return self._eta(_ids.validate(id, "JOB", "job id"), "")

    def lane_eta(self, group: str) -> Eta:
        """``queue.lane(group).eta()``, blocking: where a job enqueued on ``group`` now would
        stand."""
        reply = self._eta("", validate_group(group))
        assert reply is not None  # a lane always answers
        return reply

    def _eta(self, job_id: str, group: str) -> Eta | None:
        script = self.scripts["eta"]
        command = pack(script.command((self.keys.root, self.keys.gate), (job_id, group)))
        reply = self._call(command, script)
        return None if reply is None else estimate(list(reply))

    def state(self, id: str) -> JobState:
        """``pending``, ``active``, ``scheduled``, ``dead``, ``completed``, ``cancelled`` or
        ``absent``."""
        job_id = _ids.validate(id, "JOB", "job id")
        return job_state(self._read(("HGET", self.keys.job(job_id), "state")))

    def wait(self, id: str, timeout: float | None = None) -> JobInfo | None:
        """Block until job ``id`` is ``completed``, ``dead`` or ``cancelled`` and return its row;
        None after ``timeout`` seconds (None: no limit), and None at once when no such job exists.

        Subscribes to the queue's completion channel first and reads the row after the server
        confirmed it (and again after every reconnect), so a completion is never missed.
        """
        job_id = _ids.validate(id, "JOB", "job id")
        if timeout is not None:
            ms(timeout, "timeout", most=MAX_DURATION)
        deadline = None if timeout is None else time.monotonic() + timeout
        router = self._here().router
        waiter = SyncWaiter(
            router, self._slot, self._done, self.keys.job(job_id), job_id, self.codec, deadline
        )
        return waiter.run()

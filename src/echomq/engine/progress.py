"""Progress and logs of a running job: the checks that turn a report into what progress.lua
takes (shared with the task layer's eager runs), and the :class:`Queue` verbs that send and read
them (``Queue(Settles, Reports)``).

A report is fenced by the claim's token like a settle, but settles nothing: the row's
``progress`` (a small JSON value) and the job's log (``log:<id>``, its newest lines) live as
long as the row. Each report is published on the queue's event channel (``progress``, ``log``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any, Final

from echomq.engine import ids as _ids
from echomq.engine.checks import MAX_LIMIT, count, text, utf8_size
from echomq.engine.keys import Keyspace
from echomq.engine.results import Job
from echomq.engine.settles import _ref
from echomq.engine.transitions import Engine
from echomq.errors import InvalidArgument, shown
from echomq.wire.codec import checked_json

#: The largest progress value, encoded as JSON (UTF-8 bytes).
MAX_PROGRESS: Final = 1024
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
#: The longest log line (UTF-8 bytes), and the most lines one report may append.
MAX_LOG_LINE: Final = 1024
MAX_LOG_LINES: Final = 1000
#: The most lines a job's log may keep (``keep``); 100 unless told.
MAX_LOG_KEEP: Final = 1000
LOG_KEEP: Final = 100


def progress_json(value: Any) -> str:
    """``value`` as the row's ``progress`` keeps it: compact JSON of at most ``MAX_PROGRESS``
    bytes (``InvalidArgument`` naming ``value`` otherwise)."""
    encoded, data = checked_json(value, "value", "must be a JSON value", _ENCODER)
    size = len(data)
    if size > MAX_PROGRESS:
        raise InvalidArgument(
            "value", f"<{size} bytes>", f"encodes to more than {MAX_PROGRESS} bytes of JSON"
        )
    return encoded


def log_lines(lines: Iterable[str] | str) -> list[str]:
    """Log lines as progress.lua appends them (a str is one line), each at most
    ``MAX_LOG_LINE`` bytes, at most ``MAX_LOG_LINES`` per report (``InvalidArgument`` naming
    ``log``)."""
    if isinstance(lines, str):
        batch = [lines]
    elif isinstance(lines, bytes | bytearray | memoryview) or not isinstance(lines, Iterable):
        raise InvalidArgument("log", shown(lines, 80), "must be a str (one line) or str lines")
    else:
        batch = list(islice(lines, MAX_LOG_LINES + 1))  # a generator need not end
    if len(batch) > MAX_LOG_LINES:
        raise InvalidArgument(
            "log", f"<over {MAX_LOG_LINES} lines>", f"at most {MAX_LOG_LINES} lines per report"
        )
    for line in batch:
        if not isinstance(line, str):
            raise InvalidArgument("log", line, f"a line must be a str, got {type(line).__name__}")
        size = utf8_size(line, "log")
        if size > MAX_LOG_LINE:
            raise InvalidArgument(
                "log", f"<{size} bytes>", f"a line must be at most {MAX_LOG_LINE} bytes"
            )
    return batch


class Reports:
    """Progress and logs (mixed into :class:`Queue`)."""

    engine: Engine
    keys: Keyspace
    _listened: Callable[[], bool]
    _emit: Callable[[Iterable[dict[str, Any]]], None]

    async def progress(
        self,
        job: Job | str,
        token: int | None = None,
        *,
        value: Any = None,
        log: Iterable[str] | str = (),
        keep: int = LOG_KEEP,
    ) -> bool:
        """Report a held job's progress and/or append lines to its log, fenced by the claim's
        token. False when the job is gone (no row, or this claim settled it already).

        ``value`` (None: leave it) is a small JSON value (at most 1 KiB encoded), kept as the
        row's ``progress`` (:attr:`JobInfo.progress`); ``log`` lines (a str is one line, each
        at most 1 KiB, at most 1,000 a call) go to the job's log, of which the newest ``keep``
        (1 … 1,000) are kept (:meth:`logs`). Both live as long as the row. Every bound is
        checked before any write. Raises :class:`StaleTokenError` when another claim holds
        the job. Each report is published as a ``progress`` event and one ``log`` event per line.
        """
        job_id, token = _ref(job, token)
        encoded = None if value is None else progress_json(value)
        lines = log_lines(log)
        kept = count(keep, "keep", maximum=MAX_LOG_KEEP)
        if encoded is None and not lines:
            raise InvalidArgument("value", value, "report a value, log lines, or both")
        recorded = await self.engine.progress(job_id, token, encoded, lines, kept)
        if recorded and self._listened():
            events = [{"event": "log", "job": job_id, "line": line} for line in lines]
            if encoded is not None:
                events.insert(0, {"event": "progress", "job": job_id, "progress": value})
            self._emit(events)
        return recorded

    async def logs(self, id: str, limit: int = LOG_KEEP) -> list[str]:
        """The newest ``limit`` lines of a job's log, oldest first ([] when it has none)."""
        job_id = _ids.validate(id, "JOB", "job id")
        most = count(limit, "limit", maximum=MAX_LIMIT)
        lines = await self.engine.wire.call("LRANGE", self.keys.log(job_id), -most, -1)
        return [text(line) for line in lines]

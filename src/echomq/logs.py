"""Log formats for echomq workers and the applications around them: :class:`JsonFormatter`
(one JSON object per line: time, level, logger, message, and on every line about a job its
queue, lane, job id, attempt and trace id), :class:`TextFormatter` (the worker's plain lines),
and :class:`JobFilter` (the job's fields as record attributes, for a format of your own).

Both formatters pass what they write through :func:`redact`: a URL's password and a token in
a query string or an ``Authorization`` header never reach a log line, whoever logged them.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

from echomq.consumers.log_fields import JOB_FIELDS, job_fields
from echomq.tasks.context import context

__all__ = ["JobFilter", "JsonFormatter", "TextFormatter", "redact"]

# scheme://user:password@ -> scheme://user:***@ (the user name stays: it names, it opens nothing)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@]*):[^\s/@]+@")
# ?token=… &password=… (a dashboard's link, a webhook's URL), and Authorization headers
_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:token|password|passwd|secret|api_key|apikey|access_token|key)=)[^&\s#\"']+"
)
_BEARER = re.compile(r"(?i)\b(authorization:\s*(?:bearer|basic|token)?|bearer)(\s+)[^\s\"',]{8,}")


def redact(text: str) -> str:
    """``text`` with the passwords of URLs (``valkey://:***@host``), secret query parameters
    (``?token=***``) and ``Authorization`` credentials (``Bearer ***``) masked."""
    if "://" in text:
        text = _URL_PASSWORD.sub(r"\1:***@", text)
    if "=" in text:
        text = _QUERY_SECRET.sub(r"\1***", text)
    return _BEARER.sub(r"\1\2***", text)


def _about_job(record: logging.LogRecord) -> dict[str, Any] | None:
    """The job fields of a record: given by the line (``extra=``), else those of the task
    running where it was logged, else None (a line about no job)."""
    if getattr(record, "job_id", None) is not None:
        return {name: getattr(record, name, None) for name in JOB_FIELDS}
    try:
        running = context()
    except LookupError:
        return None
    return job_fields(running.job)


class JobFilter(logging.Filter):
    """Sets ``queue``, ``lane``, ``job_id``, ``attempt`` and ``trace_id`` on every record (None
    on a line about no job), so a format of your own can name them: add it to the handler, as
    ``handler.addFilter(JobFilter())``. It never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _about_job(record) or dict.fromkeys(JOB_FIELDS)
        for name, value in fields.items():
            setattr(record, name, value)
        return True


class TextFormatter(logging.Formatter):
    """A ``logging.Formatter`` (same arguments) whose lines are :func:`redact`-ed: the
    worker's ``--log-format text``, ``%(asctime)s %(name)s %(message)s``."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (ISO 8601, UTC, milliseconds), ``level``,
    ``logger``, ``message``; on a line about a job ``queue``, ``lane``, ``job_id``,
    ``attempt`` and ``trace_id`` (the job's trace when traced, else null); ``exception``
    (the formatted traceback) when the record has one. Secrets are :func:`redact`-ed.

    For an application::

        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=logging.INFO, handlers=[handler])

    The job's fields come from the line itself or, for the lines a task writes while it runs
    (with any logger), from its :func:`echomq.context`: format on the logging thread (a
    ``StreamHandler``, not a ``QueueHandler``'s listener) or add a :class:`JobFilter` first.
    It takes ``logging.Formatter``'s arguments (so ``logging.config.dictConfig`` can make it
    by ``class``) and ignores the format string: the line is always the JSON object.
    """

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        fields = _about_job(record)
        if fields is not None:
            line.update(fields)
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = redact(record.exc_text)
        if record.stack_info:
            line["stack"] = redact(self.formatStack(record.stack_info))
        return json.dumps(line, ensure_ascii=False, default=str)

"""The fields a log line about a job carries (queue, lane, job id, attempt, trace id), given as
``extra=job_fields(job)`` by the lines the consumers write about a job; ``echomq.logs`` formats
them (and finds them in a running task's context for the lines a task writes itself)."""

from __future__ import annotations

from typing import Any

from echomq.engine.results import Job
from echomq.tracing import current_trace_id, trace_id

#: The record attributes, in the order a JSON line shows them.
JOB_FIELDS = ("queue", "lane", "job_id", "attempt", "trace_id")


def job_fields(job: Job) -> dict[str, Any]:
    """The ``extra`` of a log line about ``job``. ``trace_id``: the trace the job's payload
    carries (a task's, traced: docs/guides/observability.md), else the current span's, else
    None."""
    return {
        "queue": job.queue,
        "lane": job.lane,
        "job_id": job.id,
        "attempt": job.attempts,
        "trace_id": trace_id(job.payload) or current_trace_id(),
    }

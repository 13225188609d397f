"""The fields a log line about a job carries (queue, lane, job id, attempt, trace id), given as
``extra=job_fields(job)`` by the lines the consumers write about a job; ``echomq.logs`` formats
them (and finds them in a running task's context for the lines a task writes itself)."""

from __future__ import annotations

from typing import Any

from echomq.engine.results import Job

#: The record attributes, in the order a JSON line shows them.
JOB_FIELDS = ("queue", "lane", "job_id", "attempt", "trace_id")


def job_fields(job: Job) -> dict[str, Any]:
    """The ``extra`` of a log line about ``job``. ``trace_id`` is reserved: None until traces
    (OpenTelemetry) carry one in the job."""
    return {
        "queue": job.queue,
        "lane": job.lane,
        "job_id": job.id,
        "attempt": job.attempts,
        "trace_id": None,
    }

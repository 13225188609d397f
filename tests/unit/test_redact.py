"""echomq.logs.redact: the passwords of URLs, secret query parameters and Authorization
credentials are masked; the rest of a line is left as it was."""

from __future__ import annotations

import json
import logging

import pytest

from echomq.logs import JsonFormatter, redact


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("on valkey://:s3cret@db:6379/0", "on valkey://:***@db:6379/0"),
        ("rediss://user:p%40ss@h:1 and redis://u:x@h", "rediss://user:***@h:1 and redis://u:***@h"),
        ("http://127.0.0.1:8700/?token=abc-DEF_1&x=1", "http://127.0.0.1:8700/?token=***&x=1"),
        ("GET /hook?a=1&password=hunter2 200", "GET /hook?a=1&password=*** 200"),
        ("Authorization: Bearer eyJhbGciOi.x.y", "Authorization: Bearer ***"),
        ("valkey://user@host:6379 has no password", "valkey://user@host:6379 has no password"),
        ("the token expired; key = 3", "the token expired; key = 3"),
    ],
)
def test_redact_masks_secrets_and_nothing_else(line: str, shown: str) -> None:
    assert redact(line) == shown


def test_json_formatter_takes_a_formatters_arguments_and_formats_a_job_line() -> None:
    """As ``logging.config.dictConfig`` makes a formatter by ``class``: (fmt, datefmt, style)."""
    record = logging.LogRecord("app", logging.WARNING, __file__, 1, "to %s", ("x",), None)
    record.__dict__.update(queue="q", lane="acme", job_id="JOB0Sc7HwMh4E4", attempt=2)
    line = json.loads(JsonFormatter("%(message)s", "%H:%M", "%").format(record))
    assert line["message"] == "to x"
    assert (line["level"], line["logger"], line["lane"], line["attempt"]) == (
        "WARNING",
        "app",
        "acme",
        2,
    )
    assert line["trace_id"] is None

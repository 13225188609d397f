"""The operations pages keep up with the code: docs/operations/metrics.md's table names every
Prometheus series echomq exposes (counters under their exposed ``_total`` name), and
docs/operations/cli.md's table has a row for every verb of the ``echomq`` command; the
reference pages name every exception echomq exports and every script of the engine."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

import echomq
import echomq.consumers
import echomq.errors
from echomq.cli import main

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations"
DOC = OPERATIONS / "metrics.md"


def test_every_series_is_in_the_metrics_table() -> None:
    series: set[str] = set()
    for module in Path(echomq.__file__).parent.rglob("*.py"):  # wherever the families live
        series |= set(re.findall(r'MetricFamily\(\s*"(echomq_[a-z_]+)"', module.read_text()))
    assert {"echomq_jobs", "echomq_wait_seconds", "echomq_settled"} <= series
    table = set(re.findall(r"`(echomq_[a-z_]+)`", DOC.read_text()))
    missing = [s for s in sorted(series) if s not in table and f"{s}_total" not in table]
    assert not missing, f"series missing from docs/operations/metrics.md: {missing}"


class _Parsed(Exception):
    pass


def test_every_cli_verb_has_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[argparse.ArgumentParser] = []

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        seen.append(self)
        raise _Parsed  # the parser is built: stop before anything runs

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    with pytest.raises(_Parsed):
        main(["stats", "q"])
    (verbs,) = [a for a in seen[0]._actions if isinstance(a, argparse._SubParsersAction)]
    rows = (OPERATIONS / "cli.md").read_text()
    missing = [
        verb for verb in verbs.choices if not re.search(rf"^\| `[^|]*\b{verb}\b", rows, re.M)
    ]
    assert not missing, f"verbs without a row in docs/operations/cli.md: {missing}"


def test_every_exported_exception_is_in_the_errors_page() -> None:
    errors = (OPERATIONS.parent / "reference" / "errors.md").read_text()
    exported = [
        name
        for module in (echomq, echomq.errors, echomq.consumers)
        for name in module.__all__
        if isinstance(getattr(module, name), type)
        and issubclass(getattr(module, name), BaseException)
    ]
    assert {"EchoMQError", "TaskFailed", "Retry"} <= set(exported)
    missing = [name for name in exported if not re.search(rf"\b{name}\b", errors)]
    assert not missing, f"exceptions missing from docs/reference/errors.md: {missing}"


def test_every_script_has_a_row_in_the_scripts_page() -> None:
    scripts = sorted(
        path.stem
        for path in (Path(echomq.__file__).parent / "engine" / "lua").glob("*.lua")
        if not path.stem.startswith("_")
    )
    assert {"enqueue", "claim", "tick", "node"} <= set(scripts)
    rows = (OPERATIONS.parent / "reference" / "scripts.md").read_text()
    missing = [name for name in scripts if not re.search(rf"^\|[^|]*`{name}`", rows, re.M)]
    assert not missing, f"scripts without a row in docs/reference/scripts.md: {missing}"

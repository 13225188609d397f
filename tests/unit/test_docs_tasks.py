"""docs/guides/tasks.md keeps up with the code: its testing example is the file make test runs
(included, not copied), and every public name the task layer added is in it."""

from __future__ import annotations

import re
from pathlib import Path

import echomq
import echomq.consumers
import echomq.engine
import echomq.errors
import echomq.tasks

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "guides" / "tasks.md").read_text()
ADDED = [
    "App", "AppWorker", "BatchTask", "Batching", "Call", "Completed", "Context", "Handle",
    "HookFailed", "Member", "MemberVerdict", "ResultMissing", "ResultTimeout", "RetryPlan",
    "Schedule", "SyncHandle", "SyncQueue", "Task", "TaskFailed", "TaskOutcome", "context",
    "TaskCancelled", "Cancellation", "shielded",
    "chain", "group", "flow", "TaskFlow", "FlowHandle",
]  # fmt: skip


def test_the_testing_example_in_the_docs_is_the_file_that_runs() -> None:
    assert (ROOT / "examples" / "test_emailapp.py").is_file()
    blocks = re.findall(r"```python\n(.*?)```", DOC, re.S)
    assert '--8<-- "examples/test_emailapp.py"\n' in blocks


def test_every_public_name_of_the_task_layer_is_documented() -> None:
    wings = (echomq, echomq.tasks, echomq.errors, echomq.engine, echomq.consumers)
    assert set(ADDED) <= {name for module in wings for name in module.__all__}
    missing = [name for name in ADDED if not re.search(rf"`{name}[`(,]", DOC)]
    assert not missing, f"docs/guides/tasks.md does not name {missing}"

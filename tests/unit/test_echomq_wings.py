"""echomq's wings, read from the imports (``ast``, nothing is imported): arrows run one way,
wire <- engine <- consumers <- tasks, and none of them reaches up into the operator side
(``ops``, ``dashboard``, ``metrics``, ``cli``, ``contrib``). The wire is the floor: it imports
nothing of echomq but itself and the errors (STYLE.md, "Layout")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "echomq"

WINGS = ("wire", "engine", "consumers", "tasks")
"""Bottom to top: a wing may import the ones before it, never the ones after."""

OPERATOR_SIDE = ("ops", "dashboard", "metrics", "cli", "contrib")
"""What sits on top of every wing; no wing imports it."""

WIRE_MAY_IMPORT = ("echomq.wire", "echomq.errors", "echomq._extras")


def echomq_imports(path: Path) -> set[str]:
    """The echomq modules ``path`` imports, lazily imported ones inside functions included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return {module for module in found if module.split(".")[0] == "echomq"}


def wing_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


@pytest.mark.parametrize("wing", WINGS)
def test_a_wing_imports_no_wing_above_it_and_nothing_of_the_operator_side(wing: str) -> None:
    above = set(WINGS[WINGS.index(wing) + 1 :]) | set(OPERATOR_SIDE)
    offenders = sorted(
        f"{path.relative_to(SRC)} -> {module}"
        for path in sorted((SRC / wing).rglob("*.py"))
        for module in echomq_imports(path)
        if wing_of(module) in above
    )
    assert offenders == []


def test_the_wire_imports_nothing_of_echomq_but_itself_and_the_errors() -> None:
    offenders = sorted(
        f"{path.relative_to(SRC)} -> {module}"
        for path in sorted((SRC / "wire").rglob("*.py"))
        for module in echomq_imports(path)
        if not module.startswith(WIRE_MAY_IMPORT)
    )
    assert offenders == []


def test_every_wing_is_there() -> None:
    """A renamed wing would make the tests above pass on nothing."""
    for wing in (*WINGS, "ops", "dashboard"):
        assert any((SRC / wing).rglob("*.py")), wing


def module_file(module: str) -> Path | None:
    """The source of an echomq module (``echomq`` itself is its ``__init__``), else None."""
    base = SRC.joinpath(*module.split(".")[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported_modules(path: Path) -> set[str]:
    """The echomq modules ``path`` imports, ``from package import module`` as the module."""
    found = set(echomq_imports(path))
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                if name.split(".")[0] == "echomq" and module_file(name) is not None:
                    found.add(name)
    return found


def test_the_consumers_reach_nothing_of_the_tasks_through_any_chain_of_imports() -> None:
    """Both claim loops live in consumers/ and the task layer plugs into them (a batch task
    through ``RunBatch``), never the reverse. Followed through every module the consumers
    import and the ones those import, so a detour through another wing, or through the
    package root (which imports the task layer), counts too."""
    start = {
        "echomq." + ".".join(path.relative_to(SRC).with_suffix("").parts)
        for path in (SRC / "consumers").rglob("*.py")
    }
    reached, todo = set(start), list(start)
    while todo:
        path = module_file(todo.pop())
        if path is None:
            continue
        for module in imported_modules(path) - reached:
            reached.add(module)
            todo.append(module)
    assert {"echomq.consumers.batch", "echomq.engine.queue"} <= reached  # the walk walked
    assert sorted(m for m in reached if m == "echomq" or m.startswith("echomq.tasks")) == []

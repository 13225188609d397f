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

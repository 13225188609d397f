"""echomq's wings, read from the imports (``ast``, nothing is imported): arrows run one way,
wire <- engine <- consumers <- tasks, and none of them reaches up into the operator side
(``ops``, ``dashboard``, ``metrics``, ``cli``, ``contrib``). The wire is the floor: it imports
nothing of echomq but itself and the errors (STYLE.md, "Layout").

Two rules across the boundary (docs/reference/wings.md): an application — codemojex, examples/,
the docs' snippets and doctests, the README — imports only the public modules of
``PUBLIC_MODULES``; and inside echomq, no file reaches into another class's ``_private``
members defined in another file (counted, with a ceiling that only goes down)."""

from __future__ import annotations

import ast
import importlib
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "echomq"

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


PUBLIC_MODULES = frozenset(
    {
        "echomq",
        "echomq.errors",
        "echomq.engine",
        "echomq.consumers",
        "echomq.tasks",
        "echomq.wire",
        "echomq.server",
        "echomq.testing",
        "echomq.metrics",
        "echomq.dashboard",
        "echomq.logs",
        "echomq.contrib.django",
    }
)
"""What an application imports of echomq: the top level, each wing by its package (never a
module inside it) and the operator's and tester's modules. Each has a pinned ``__all__``
(tests/unit/test_public_api.py)."""

SNIPPET = re.compile(r'^--8<-- "(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"$', re.M)
FENCE = re.compile(r"^[ ]*```(?P<language>\w*)[^\n]*\n(?P<body>.*?)^[ ]*```[ ]*$", re.M | re.S)


def imported_modules(source: str, where: str) -> Iterator[str]:
    """The echomq modules ``source`` imports; ``from echomq import server`` names the module
    ``echomq.server``."""
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                yield dotted if is_echomq_module(dotted) else node.module


def is_echomq_module(dotted: str) -> bool:
    path = SRC.parent / Path(*dotted.split("."))
    return dotted.startswith("echomq.") and (
        path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
    )


def section(source: str, name: str | None) -> str:
    if name is None:
        return source
    start = source.index("\n", source.index(f"# --8<-- [start:{name}]")) + 1
    end = source.rindex("\n", start, source.index(f"# --8<-- [end:{name}]", start)) + 1
    return textwrap.dedent(source[start:end])


def doc_sources() -> Iterator[tuple[str, str]]:
    """Every piece of Python the docs and the README show: snippets (the file or its section),
    the README's own blocks, and the doctests of pycon blocks."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for block in FENCE.finditer(page.read_text(encoding="utf-8")):
            where = f"{page.relative_to(ROOT)}:{block['language']}"
            body = "\n".join(
                line.strip() if "--8<--" in line else line for line in block["body"].splitlines()
            )
            if block["language"] == "pycon":
                lines = [
                    line[4:] for line in body.splitlines() if line.startswith((">>> ", "... "))
                ]
                yield where, "\n".join(lines)
            elif block["language"] == "python":
                snippets = list(SNIPPET.finditer(body))
                for snippet in snippets:
                    source = (ROOT / snippet["path"]).read_text(encoding="utf-8")
                    yield f"{where} {snippet['path']}", section(source, snippet["section"])
                if not snippets:
                    yield where, body
    for path in sorted((ROOT / "docs").rglob("*.py")):
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")


def application_sources() -> Iterator[tuple[str, str]]:
    for folder in ("codemojex/src", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    yield from doc_sources()


def test_applications_docs_and_examples_import_only_the_public_modules() -> None:
    offenders = sorted(
        {
            f"{where} -> {module}"
            for where, source in application_sources()
            for module in imported_modules(source, where)
            if module.split(".")[0] == "echomq" and module not in PUBLIC_MODULES
        }
    )
    assert offenders == [], "import from a public module (docs/reference/wings.md)"


def test_every_public_module_is_curated() -> None:
    for name in PUBLIC_MODULES:
        assert isinstance(importlib.import_module(name).__all__, list), name


def test_the_import_rule_sees_snippets_doctests_and_the_readme() -> None:
    seen = dict(doc_sources())
    assert any(" examples/" in where for where in seen)
    assert any(where.startswith("README.md:python") for where in seen)
    assert any(":pycon" in where for where in seen)
    assert list(imported_modules("from echomq import testing\nimport echomq.engine.ids\n", "x"))
    assert set(imported_modules("from echomq import testing, App\n", "x")) == {
        "echomq.testing",
        "echomq",
    }


PRIVATE = re.compile(r"^_[a-z0-9]\w*$")


def class_privates(tree: ast.AST) -> set[str]:
    """The ``_private`` members the classes of one file define: methods, class attributes and
    ``self._x`` assignments."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                    found.add(statement.name)
                elif isinstance(statement, ast.AnnAssign) and isinstance(
                    statement.target, ast.Name
                ):
                    found.add(statement.target.id)
                elif isinstance(statement, ast.Assign):
                    found.update(t.id for t in statement.targets if isinstance(t, ast.Name))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            found.add(node.attr)
    return {name for name in found if PRIVATE.match(name)}


def private_reaches() -> list[str]:
    """``x._member`` where ``_member`` is a private member of a class of another file of echomq
    (``self._member`` and ``cls._member`` are a class's own, never counted)."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in SRC.rglob("*.py")}
    owned = {path: class_privates(tree) for path, tree in trees.items()}
    everywhere = set().union(*owned.values())
    reaches = []
    for path, tree in sorted(trees.items()):
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in everywhere
                and node.attr not in owned[path]
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                reaches.append(f"{path.relative_to(SRC)}:{node.lineno} .{node.attr}")
    return sorted(reaches)


MAX_PRIVATE_REACHES = 0
"""No file reaches into another file's class privates (it was 34 before issue 25's seam): reach
through a public (or documented internal) method instead."""


def test_no_more_reaches_into_another_files_privates_than_the_ceiling() -> None:
    reaches = private_reaches()
    assert len(reaches) <= MAX_PRIVATE_REACHES, "\n".join(reaches)


def test_the_reach_count_sees_a_reach() -> None:
    owner = ast.parse("class Queue:\n    def __init__(self):\n        self._wire = 1\n")
    assert class_privates(owner) == {"_wire"}
    assert "_wire" not in class_privates(ast.parse("def f(queue):\n    return queue._wire\n"))


def module_file(module: str) -> Path | None:
    """The source of an echomq module (``echomq`` itself is its ``__init__``), else None."""
    base = SRC.joinpath(*module.split(".")[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def modules_imported_by(path: Path) -> set[str]:
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
        for module in modules_imported_by(path) - reached:
            reached.add(module)
            todo.append(module)
    assert {"echomq.consumers.batch", "echomq.engine.queue"} <= reached  # the walk walked
    assert sorted(m for m in reached if m == "echomq" or m.startswith("echomq.tasks")) == []


def runtime_imports(path: Path) -> set[str]:
    """The echomq modules ``path`` imports when it runs (at load or inside a function), not
    those only a type checker reads (``if TYPE_CHECKING:``); ``from package import module`` as
    the module."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                found.add(child.module)
                found.update(f"{child.module}.{alias.name}" for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return {m for m in found if m.split(".")[0] == "echomq" and module_file(m) is not None}


def test_no_module_imports_itself_through_a_circle() -> None:
    """Each module of echomq (packages' ``__init__`` re-exports aside) is reached from the
    modules it imports, at load or later, never back: a circle was the task layer's knot."""
    modules = {
        "echomq." + ".".join(path.relative_to(SRC).with_suffix("").parts): path
        for path in SRC.rglob("*.py")
        if path.name != "__init__.py"
    }
    graph = {name: runtime_imports(path) & modules.keys() for name, path in modules.items()}
    circles = []
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            module = todo.pop()
            if module == start:
                circles.append(start)
                break
            if module not in seen:
                seen.add(module)
                todo.extend(graph[module])
    assert circles == []


def test_the_circle_check_sees_a_circle(tmp_path: Path) -> None:
    one = tmp_path / "one.py"
    one.write_text("import echomq.errors\nif TYPE_CHECKING:\n    import echomq.wire.pool\n")
    assert runtime_imports(one) == {"echomq.errors"}

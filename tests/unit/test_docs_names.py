"""The names the docs and echomq's docstrings point at exist, so a file that moves takes its
mentions with it. Read from README.md and docs/**/*.md (backticked spans outside code blocks)
and from the docstrings and comments of src/echomq (``literal`` spans and bare file names):

* ``echomq.…`` resolves: a module of the checkout, then its attributes (a logger's name, as
  ``logging.getLogger`` gets it, counts too); a name the top level gave up (``echomq.Minter``)
  fails, pointing at its home;
* a file (``engine/waiters.py``, ``claim.lua``) is a file of the checkout (a path suffix
  matches), unless it is one of the reader's own (``USER_FILES``);
* in docstrings and comments, a private module (``_checks.MAX_TRACEBACK``, ``_sync_wire``) is
  a module of echomq, or a name its code defines.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

import echomq
from echomq import tracing

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "echomq"
TREES = ("src", "codemojex", "examples", "bench", "tests", "docs", ".ci")
FENCED = re.compile(r"^[ ]*(```|~~~).*?^[ ]*\1[ ]*$", re.M | re.S)
DOTTED = re.compile(r"^echomq(\.\w+)+")
FILE = re.compile(r"^[\w./-]+\.(py|lua)$")
BARE_FILE = re.compile(r"(?<![\w`/.-])((?:[\w-]+/)*[\w-]+\.(?:py|lua))\b")
PRIVATE = re.compile(r"^_[a-z]\w*(\.\w+)*$")
PLACEHOLDERS = {"echomq.X", "echomq._", "echomq.__all__"}  # `echomq._*`
SPAN_ATTRIBUTES = frozenset(tracing.ATTRIBUTES)
"""The OpenTelemetry span attributes of echomq's own, named like modules (``echomq.lane``)."""
USER_FILES = {"myproject/tasks.py", "myapp.py", "emailapp.py", "tasks.py", "settings.py"}
"""Files of the reader's project the docs name (``echomq worker myapp:app``)."""


def docs_spans() -> Iterator[tuple[str, str]]:
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = FENCED.sub("", page.read_text(encoding="utf-8"))
        for span in re.findall(r"`([^`\n]+)`", text):
            yield str(page.relative_to(ROOT)), span.strip()


def source_spans() -> Iterator[tuple[str, str]]:
    """Spans of the docstrings and comments of echomq (its Lua's comments too)."""
    for path in sorted(SRC.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            is_docstring = token.type == tokenize.STRING and token.string.lstrip("rbuf")[:3] in (
                '"""',
                "'''",
            )
            if token.type == tokenize.COMMENT or is_docstring:
                yield from text_spans(where, token.string)
    for path in sorted(SRC.rglob("*.lua")):
        comments = re.findall(r"--(.*)$", path.read_text(encoding="utf-8"), re.M)
        yield from text_spans(str(path.relative_to(ROOT)), "\n".join(comments))


def text_spans(where: str, text: str) -> Iterator[tuple[str, str]]:
    for span in re.findall(r"``?([^`\n]+?)``?", text):
        yield where, span.strip().lstrip("~")  # :class:`~echomq.engine.Minter`
    for name in BARE_FILE.findall(text):
        yield where, name


@cache
def checkout_files() -> tuple[str, ...]:
    found = [str(path.relative_to(ROOT)) for tree in TREES for path in (ROOT / tree).rglob("*")]
    return tuple(sorted({*found, *(p.name for p in ROOT.iterdir())}))


@cache
def logger_names() -> frozenset[str]:
    pattern = re.compile(r"getLogger\(\"([\w.]+)\"\)")
    return frozenset(
        name for path in SRC.rglob("*.py") for name in pattern.findall(path.read_text())
    )


@cache
def defined_names() -> frozenset[str]:
    """Every name echomq's code binds: functions, classes, variables, attributes, arguments."""
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found.add(node.name)
            elif isinstance(node, ast.Name | ast.arg):
                found.add(node.id if isinstance(node, ast.Name) else node.arg)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.alias):
                found.add(node.asname or node.name.split(".")[-1])
    return frozenset(found)


def is_module(dotted: str) -> bool:
    path = SRC.parent / Path(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def dotted_problem(span: str) -> str | None:
    name = DOTTED.match(span)
    assert name
    dotted = name[0]
    if dotted in PLACEHOLDERS or dotted in logger_names():
        return None
    parts = dotted.split(".")
    if parts[1] in echomq.MOVED:
        return f"moved: import it from {echomq.MOVED[parts[1]]}"
    depth = max(n for n in range(1, len(parts) + 1) if is_module(".".join(parts[:n])))
    value: object = importlib.import_module(".".join(parts[:depth]))
    for attribute in parts[depth:]:
        if not hasattr(value, attribute):
            return f"no {attribute} in {'.'.join(parts[:depth])}"
        value = getattr(value, attribute)
    return None


def file_problem(span: str) -> str | None:
    if span in USER_FILES:
        return None
    name = span.removeprefix("./")
    if any(path == name or path.endswith("/" + name) for path in checkout_files()):
        return None
    return "no such file in the checkout"


def private_problem(span: str) -> str | None:
    head, _, tail = span.partition(".")
    if any(path.endswith(f"/{head}.py") for path in checkout_files()):
        return None
    if not tail and head in defined_names():
        return None
    return f"no module {head}.py in echomq" + ("" if tail else f", and no name {head}")


def problems(spans: Iterator[tuple[str, str]], privates: bool) -> list[str]:
    found = []
    for where, span in spans:
        problem = None
        if span in SPAN_ATTRIBUTES:
            continue  # a span attribute's name (echomq.outcome), not a module's
        if DOTTED.match(span):
            problem = dotted_problem(span)
        elif FILE.match(span):
            problem = file_problem(span)
        elif privates and PRIVATE.match(span):
            problem = private_problem(span)
        if problem:
            found.append(f"{where}: `{span}`: {problem}")
    return sorted(set(found))


def test_every_name_the_docs_point_at_exists() -> None:
    assert problems(docs_spans(), privates=False) == []


def test_every_name_echomqs_docstrings_and_comments_point_at_exists() -> None:
    assert problems(source_spans(), privates=True) == []


@pytest.mark.parametrize(
    ("span", "problem"),
    [
        ("echomq.engine.no_such_module", "no no_such_module"),
        ("echomq.Minter", "moved"),
        ("tasks/no_such_file.py", "no such file"),
        ("_sync_wire", "no module _sync_wire.py"),
        ("_checks.MAX_TRACEBACK", "no module _checks.py"),
    ],
)
def test_the_rule_refuses_a_stale_name(span: str, problem: str) -> None:
    assert problem in "\n".join(problems(iter([("here", span)]), privates=True))


def test_the_rule_sees_the_spans() -> None:
    assert any(span == "echomq.testing" for _, span in docs_spans())
    assert any(span.endswith(".lua") for _, span in source_spans())
    role = text_spans("here", "A leased :class:`~echomq.Minter`, see _waiters.py.")
    assert problems(role, privates=True) == [
        "here: `_waiters.py`: no such file in the checkout",
        "here: `echomq.Minter`: moved: import it from echomq.engine",
    ]

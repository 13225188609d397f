"""Every code block on the documentation site is tested, or this test says which one is not.

The rule, per fenced block in docs/**/*.md (the fence must name its language):

* ``python`` — only snippet lines, ``--8<-- "PATH"`` or ``--8<-- "PATH:SECTION"``. PATH must
  be a file that a test runs: a program under examples/ that tests/examples/test_examples.py
  names (it runs each one and checks what it prints), a module of the examples/emailapp package
  (imported and driven by that test), or a pytest module (``test_*.py`` under examples/ or
  tests/, collected by ``make test``). A SECTION must be marked in the file with
  ``# --8<-- [start:SECTION]`` / ``# --8<-- [end:SECTION]``. Free-standing Python is refused.
* ``pycon`` — a doctest (``>>>`` lines and their expected output); this test runs it, with
  nothing imported beforehand, so each block is self-contained.
* ``console`` — ``$ `` lines are commands (a trailing ``\\`` continues one); other lines are
  their output. Each command, after ``NAME=value`` prefixes, a ``.venv/bin/`` prefix, a
  trailing ``&`` and ``# comments``, must be one of: ``echomq …`` or ``python -m echomq …``
  (parsed by echomq's own CLI parser: the verb and every flag must exist), ``python -m
  echomq.server …`` (parsed by its parser), ``codemojex …`` (parsed by the codemojex entry
  point's parser), ``make TARGET`` (a target of the Makefile), ``pip install …`` of echomq
  itself (``echomq``, ``echomq[extras]`` or this checkout, ``.``/``-e .``, with extras that
  pyproject.toml defines), ``python FILE`` or ``pytest FILE`` of a file that is tested as above
  (``python bench/X.py …`` only needs the file to exist: benchmarks print figures and never run
  in the suite), ``cd DIR`` to a folder of the checkout (later paths are read from there),
  or one of the third-party lines in ``THIRD_PARTY`` verbatim (how to get a
  Valkey from a package manager or a container: not run here, and listed so that no other
  shell line slips in). Parsing runs the CLI's argparse only: a patched ``parse_args`` stops
  before any command runs.
* ``text`` — a figure (a diagram, a tree, sample output); refused if a line reads as code
  (``import``, ``def``, ``await``, ``$ ``).

Any other language, or a fence without one, fails.
"""

from __future__ import annotations

import argparse
import doctest
import importlib.metadata
import re
import shlex
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLES_TEST = ROOT / "tests" / "examples" / "test_examples.py"
FENCE = re.compile(
    r"^(?P<indent>[ ]*)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)\n"
    r"(?P<body>.*?)^(?P=indent)(?P=fence)[ ]*$",
    re.M | re.S,
)
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"$')
THIRD_PARTY = {
    "docker run --rm -p 6379:6379 valkey/valkey:8",
    "apt-get install valkey-server",
    "brew install valkey",
    "valkey-server --port 6379",
}


class Parsed(Exception):
    """Raised by the patched ``parse_args`` once a command line parsed: nothing runs."""


def blocks() -> Iterator[tuple[str, int, str, str]]:
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            body = "\n".join(
                row.removeprefix(match["indent"]) for row in match["body"].splitlines()
            )
            info = match["info"].strip().split()
            yield f"{page.relative_to(ROOT)}:{line}", info[0] if info else "", body, text


ALL = list(blocks())


def _tested_files() -> set[Path]:
    named = EXAMPLES_TEST.read_text()
    tested = {
        path
        for path in (ROOT / "examples").glob("*.py")
        if f'"{path.name}"' in named or f'"{path.stem}"' in named  # run("x.py"), or imported
    }
    tested.update((ROOT / "examples" / "emailapp").glob("*.py"))  # driven by test_examples.py
    tested.update((ROOT / "examples" / "shop").glob("*.py"))  # driven by django_backend.py
    tested.update((ROOT / "examples").rglob("test_*.py"))
    tested.update((ROOT / "tests").rglob("test_*.py"))
    return tested


TESTED = _tested_files()


def check_python(body: str) -> None:
    lines = [line for line in body.splitlines() if line.strip()]
    assert lines, "an empty python block"
    for line in lines:
        match = SNIPPET.match(line.strip())
        assert match, f"free-standing Python (include a tested file instead): {line!r}"
        path = (ROOT / match["path"]).resolve()
        assert path.is_file(), f"{match['path']} does not exist"
        assert path in TESTED, f"{match['path']} is not run by any test (see the docstring)"
        if match["section"]:
            source = path.read_text()
            for mark in ("start", "end"):
                assert f"# --8<-- [{mark}:{match['section']}]" in source, (
                    f"{match['path']} has no section {match['section']!r}"
                )


def check_pycon(body: str, name: str) -> None:
    assert ">>> " in body, "a pycon block without a doctest"
    test = doctest.DocTestParser().get_doctest(body, {}, name, name, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)


def commands(body: str) -> Iterator[str]:
    pending = ""
    for row in body.splitlines():
        if pending:
            pending += " " + row.strip()
        elif row.startswith("$ "):
            pending = row[2:].strip()
        else:
            continue  # output
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        yield pending
        pending = ""
    assert not pending, f"a command continued past the block: {pending!r}"


def parse_with(main: Callable[[list[str]], Any], argv: list[str], monkeypatch: Any) -> None:
    original = argparse.ArgumentParser.parse_args

    def parse_args(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        original(self, args, namespace)
        raise Parsed

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", parse_args)
        try:
            main(argv)
        except Parsed:
            return
        except SystemExit as exc:
            if exc.code in (0, None):  # --help, --version
                return
            raise AssertionError(f"refused by its parser: {argv}") from None
    raise AssertionError(f"parsed nothing (not a command line?): {argv}")


def entry_point(name: str) -> Callable[[list[str]], Any]:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name=name)
    main: Callable[[list[str]], Any] = script.load()
    return main


def check_pip(argv: list[str]) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    wanted = [arg for arg in argv if not arg.startswith("-")]
    assert wanted, f"pip install of nothing: {argv}"
    for requirement in wanted:
        match = re.fullmatch(r"(echomq|\.|\./codemojex)(?:\[([\w,]+)\])?", requirement)
        assert match, f"pip install of something that is not echomq: {requirement}"
        for extra in (match[2] or "").split(","):
            assert not extra or extra in extras, f"no extra {extra!r} in pyproject.toml"


def check_command(line: str, monkeypatch: Any, cwd: Path = ROOT) -> Path:
    """Check one command line; answer the folder the next command runs in (``cd`` moves)."""
    if line in THIRD_PARTY:
        return cwd
    argv = shlex.split(line, comments=True)
    if argv and argv[-1] == "&":
        argv.pop()
    while argv and re.fullmatch(r"[A-Z_]+=\S*", argv[0]):
        argv.pop(0)
    assert argv, f"an empty command: {line!r}"
    program = argv[0].removeprefix(".venv/bin/")
    rest = argv[1:]
    if program == "cd":
        assert len(rest) == 1, f"cd to one folder: {line!r}"
        folder = (cwd / rest[0]).resolve()
        assert folder.is_dir(), f"{rest[0]} is not a folder of the checkout"
        return folder
    if program == "python" and rest[:2] == ["-m", "echomq.server"]:
        from echomq.server import main as server_main

        parse_with(server_main, rest[2:], monkeypatch)
    elif program == "echomq" or (program == "python" and rest[:2] == ["-m", "echomq"]):
        from echomq.cli import main as cli_main

        parse_with(cli_main, rest if program == "echomq" else rest[2:], monkeypatch)
    elif program == "codemojex":
        parse_with(entry_point("codemojex"), rest, monkeypatch)
    elif program == "make":
        targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
        assert rest, "make without a target"
        assert set(rest) <= targets, f"not a Makefile target: {rest}"
    elif program == "pip" and rest[:1] == ["install"]:
        check_pip(rest[1:])
    elif program in ("python", "pytest"):
        files = [arg for arg in rest if arg.endswith(".py")]
        assert files, f"{program} without a file: {line!r}"
        path = (cwd / files[0]).resolve()
        assert path.is_file(), f"{files[0]} does not exist"
        is_bench = path.parent == ROOT / "bench"
        assert is_bench or path in TESTED, f"{files[0]} is not run by any test"
    else:
        raise AssertionError(f"a shell line this rule does not check: {line!r}")
    return cwd


def check_text(body: str) -> None:
    for row in body.splitlines():
        assert not re.match(r"\s*(import |from \S+ import |async def |def |await |\$ )", row), (
            f"code in a text block (include a tested file instead): {row!r}"
        )


@pytest.mark.parametrize(
    ("where", "language", "body"), [b[:3] for b in ALL], ids=[b[0] for b in ALL]
)
def test_every_code_block_is_tested(
    where: str, language: str, body: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if language == "python":
        check_python(body)
    elif language == "pycon":
        check_pycon(body, where)
    elif language == "console":
        found = list(commands(body))
        assert found, "a console block without a $ command"
        cwd = ROOT
        for line in found:
            cwd = check_command(line, monkeypatch, cwd)
    elif language == "text":
        check_text(body)
    else:
        raise AssertionError(
            f"a {language or 'bare'} fence: use python (a snippet), pycon, console or text"
        )


def test_the_rule_sees_the_blocks() -> None:
    assert len(ALL) > 20
    assert any(language == "python" for _, language, _, _ in ALL)


def test_the_rule_refuses_what_it_should(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssertionError, match="free-standing"):
        check_python("import echomq\n")
    with pytest.raises(AssertionError, match="not run by any test"):
        check_python('--8<-- "bench/README.md"\n')
    with pytest.raises(AssertionError, match="refused by its parser"):
        check_command("echomq stats", monkeypatch)  # the verb needs a queue
    with pytest.raises(AssertionError, match="refused by its parser"):
        check_command("echomq worker app:app --no-such-flag", monkeypatch)
    with pytest.raises(AssertionError, match="not echomq"):
        check_command("pip install celery", monkeypatch)
    with pytest.raises(AssertionError, match="does not check"):
        check_command("rm -rf /", monkeypatch)
    with pytest.raises(AssertionError, match="Expected"):
        check_pycon(">>> 1 + 1\n3\n", "arithmetic")
    with pytest.raises(AssertionError, match="code in a text block"):
        check_text("await queue.claim()\n")
    check_command("ECHOMQ_URL=valkey://h:6379 .venv/bin/echomq lanes cm.notify &", monkeypatch)

"""The documentation site builds clean, and its generated reference covers every public name.

The build is ``mkdocs build --strict`` into a temporary folder (warnings are errors: a broken
link, an anchor that does not exist, a snippet file that is missing, a ``:::`` name the
reference cannot resolve). Then every public name — ``echomq.__all__`` and the public names of
the wings (``echomq.errors``, ``echomq.engine``, ``echomq.consumers``, ``echomq.tasks``,
``echomq.wire``) and of ``echomq.testing``, ``echomq.server``, ``echomq.metrics`` and
``echomq.dashboard`` — must be an entry (an HTML anchor mkdocstrings made for it) somewhere in
the built reference; a name exported twice (``echomq.Queue`` is ``echomq.engine.Queue``) needs
one entry under either path. A new public name fails this test until it is added to a page
under docs/reference/api/.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import echomq

ROOT = Path(__file__).resolve().parents[2]
WINGS = ["echomq.errors", "echomq.engine", "echomq.consumers", "echomq.tasks", "echomq.wire"]
MODULES = [*WINGS, "echomq.testing", "echomq.server", "echomq.metrics", "echomq.dashboard"]


def public_names(module_name: str) -> list[str]:
    """A module's public names: its ``__all__``, or (without one) what it defines not under _."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module_name
    ]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def anchors(site: Path) -> set[str]:
    found: set[str] = set()
    for page in (site / "reference").rglob("*.html"):
        found.update(re.findall(r'id="(echomq\.[\w.]+)"', page.read_text()))
    return found


def test_the_site_builds_strict_and_has_every_page(site: Path) -> None:
    for page in ["index.html", "getting-started/index.html", "reference/api/index.html"]:
        assert (site / page).is_file(), page


def test_every_public_name_has_an_entry_in_the_reference(site: Path) -> None:
    entries = anchors(site)
    expected = [f"echomq.{name}" for name in echomq.__all__]
    for module in MODULES:
        expected += [f"{module}.{name}" for name in public_names(module)]
    missing = []
    for name in expected:
        # A name both the top level and a wing export may be documented under either path.
        short = name.rpartition(".")[2]
        paths = {name}
        if short in echomq.__all__:
            paths |= {f"echomq.{short}"}
            paths |= {f"{wing}.{short}" for wing in WINGS if short in public_names(wing)}
        if not paths & entries:
            missing.append(name)
    assert not missing, f"not in the generated reference (docs/reference/api/): {missing}"


def test_every_docstring_example_of_the_public_modules_runs() -> None:
    """The API pages render the docstrings: their ``>>>`` examples run here as doctests."""
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    found = 0
    for name in ["echomq", *MODULES]:
        for test in finder.find(importlib.import_module(name)):
            found += len(test.examples)
            runner.run(test)
    assert found >= 5, "the server module's example is gone: the finder sees nothing"
    assert runner.failures == 0, f"{runner.failures} docstring example(s) failed (output above)"

"""codemojex's house rules, read from the imports (``ast``, nothing is imported): see
docs/architecture.md. A stage reaches another only through that stage's producer API module;
the edge (telegram/) and the rules (domain/) depend on no stage; nobody imports ``echomq._*``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "codemojex" / "src"
PACKAGE = SRC / "codemojex"

STAGES = ("bot", "game", "notify", "telegram")
"""The packages one queue (or the edge) each; they import one another only via :data:`API`."""

API = {
    "bot": {"codemojex.bot.api"},
    "game": {"codemojex.game.api"},
    "notify": {"codemojex.notify.api"},
    "telegram": {"codemojex.telegram", "codemojex.telegram.transport"},
}
"""Each stage's producer API: the only modules of it another stage may import."""

PURE = ("echomq", "aiogram", "aiohttp", "sqlalchemy", "codemojex.")
"""What domain/ may not import (anything of codemojex but domain itself)."""


def imports(path: Path) -> Iterator[str]:
    """Every module ``path`` imports (``from m import n`` yields ``m`` and ``m.n``), lazily
    imported ones inside functions included."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "codemojex" and parts[1] in STAGES else None


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")


def sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def is_echomq_private(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "echomq" and any(part.startswith("_") for part in parts[1:])


def test_the_house_has_its_stages() -> None:
    for stage, modules in API.items():
        assert (PACKAGE / stage / "__init__.py").is_file(), stage
        for module in modules:
            path = SRC / Path(*module.split("."))
            assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), module


def test_domain_is_pure() -> None:
    offences = [
        f"{module_of(path)} imports {name}"
        for path in sorted((PACKAGE / "domain").rglob("*.py"))
        for name in imports(path)
        if name.startswith(PURE) and not name.startswith("codemojex.domain")
    ]
    assert offences == []


def test_the_edge_imports_no_stage_and_the_store_none_either() -> None:
    offences = [
        f"{module_of(path)} imports {name}"
        for root in ("telegram", "store")
        for path in sorted((PACKAGE / root).rglob("*.py"))
        for name in imports(path)
        if (stage_of(name) or root) != root
    ]
    assert offences == []


def test_a_stage_reaches_another_only_through_its_producer_api() -> None:
    offences = []
    for path in sources():
        own = stage_of(module_of(path))
        if own is None:
            continue  # the composition root (app, cli, pipeline, flood, ...) wires every stage
        for name in imports(path):
            other = stage_of(name)
            if other is None or other == own:
                continue
            # ``from codemojex.game.api import X`` yields the module and ``…api.X``: either is fine
            if not any(name == api or name.startswith(api + ".") for api in API[other]):
                offences.append(f"{module_of(path)} imports {name}")
    assert offences == []


def test_the_game_uses_echomq_public_api_only() -> None:
    offences = [
        f"{module_of(path)} imports {name}"
        for path in sources()
        for name in imports(path)
        if is_echomq_private(name)
    ]
    assert offences == []


def test_no_test_imports_a_private_echomq_module() -> None:
    """echomq's own tests reach its internals by their wing (``echomq.engine.keys``), never by
    a top-level private ``echomq._`` module; white-box tests of a public package's parts (the
    dashboard's ``_app``) stay allowed. The game itself is held to the public API above."""
    tests = ROOT / "tests"
    offenders = {
        path.relative_to(tests).as_posix()
        for path in tests.rglob("*.py")
        if any(name.startswith("echomq._") for name in imports(path))
    }
    assert sorted(offenders) == [], "import echomq's public API, or an internal by its wing"


def test_the_rules_see_an_offence(tmp_path: Path) -> None:
    """The parser catches what the rules forbid, lazy imports inside functions included."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from codemojex.notify.worker import NotifyWorker\n"
        "def later():\n    from echomq._ids import validate\n",
        encoding="utf-8",
    )
    found = set(imports(sample))
    assert "codemojex.notify.worker" in found
    assert "echomq._ids" in found
    assert stage_of("codemojex.notify.worker") == "notify"
    assert is_echomq_private("echomq._ids")
    assert not is_echomq_private("echomq.testing")

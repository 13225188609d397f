"""codemojex.domain's surface: a sorted, pinned ``__all__``, one error root, stdlib only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import codemojex.domain as domain

PINNED = {
    "CODE_LENGTH", "DEFAULT_SET", "DIAMONDS_PER_KEY", "FREE_ROOM_FEE", "MAX_TOTAL",
    "PAID_ROOM_FEE", "SETS", "STARTING_CLIPS", "CodeError", "CodemojexError", "Currency",
    "EconomyError", "EmojiSet", "EmojiSetError", "Fee", "Feedback", "GuessError", "GuessProblem",
    "Score", "diamonds_to_keys", "draw_secret", "get_set", "parse_guess", "room_fee", "score",
    "split_pool", "DAILY_CLIPS", "allowance", "legend", "unit",
}  # fmt: skip


def test_all_is_sorted_and_pinned() -> None:
    assert domain.__all__ == sorted(domain.__all__, key=lambda n: (not n.isupper(), n))
    assert set(domain.__all__) == PINNED
    for name in domain.__all__:
        assert getattr(domain, name) is not None


def test_every_error_descends_from_the_one_root() -> None:
    for name in domain.__all__:
        value = getattr(domain, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, domain.CodemojexError), name
            assert issubclass(value, ValueError) or value is domain.CodemojexError, name


def test_the_domain_imports_only_the_standard_library_and_itself() -> None:
    for path in Path(domain.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                allowed = top in sys.stdlib_module_names or module.startswith("codemojex.domain")
                assert allowed, f"{path.name} imports {module}"

"""Emoji sets (keyboards): the symbols a room plays with, validated so a guess text made of them
reads back unambiguously, and the registry of the sets codemojex ships.

A symbol may be several code points (a skin-tone modifier, a ZWJ sequence, a U+FE0F variation
selector); matching ignores U+FE0F, so a symbol's *bare* form (U+FE0F removed) is its identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from codemojex.domain.errors import EmojiSetError

CODE_LENGTH: Final = 6
"""Symbols in a secret and in a guess."""

VARIATION_SELECTOR: Final = "\ufe0f"
"""U+FE0F (emoji presentation): keyboards send it inconsistently, so matching ignores it."""

SEPARATORS: Final = frozenset({",", "，", "、"})
"""Characters besides whitespace that may separate the symbols of a guess."""


def bare(text: str) -> str:
    """``text`` without U+FE0F: the form under which symbols are compared."""
    return text.replace(VARIATION_SELECTOR, "")


def is_separator(character: str) -> bool:
    """Whether ``character`` may separate symbols (whitespace or a comma); never part of one."""
    return character.isspace() or character in SEPARATORS


@dataclass(frozen=True, slots=True)
class EmojiSet:
    """A keyboard: a named tuple of distinct symbols, at least :data:`CODE_LENGTH` of them.

    Refused with :class:`EmojiSetError` (before any game uses it) when a symbol is empty, holds a
    separator, repeats another once U+FE0F is ignored, or when greedy longest-match could read a
    run of its symbols back differently (some symbol ``c`` = symbol ``a`` + a prefix of a run of
    symbols) — so every sequence of its symbols, written with or without separators, parses back.
    """

    name: str
    symbols: tuple[str, ...]
    _by_bare: Mapping[str, str] = field(init=False, repr=False, compare=False)
    _longest: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        symbols = tuple(self.symbols)
        object.__setattr__(self, "symbols", symbols)
        if not self.name:
            raise EmojiSetError(self.name, "empty_name", "the name is empty")
        if len(symbols) < CODE_LENGTH:
            raise EmojiSetError(
                self.name,
                "too_small",
                f"has {len(symbols)} symbols, a secret needs {CODE_LENGTH} distinct ones",
            )
        by_bare: dict[str, str] = {}
        for symbol in symbols:
            key = bare(symbol)
            if not key:
                raise EmojiSetError(self.name, "empty_symbol", f"symbol {symbol!r} is empty")
            if any(is_separator(character) for character in key):
                raise EmojiSetError(self.name, "separator", f"symbol {symbol!r} holds a separator")
            if key in by_bare:
                raise EmojiSetError(
                    self.name, "duplicate", f"symbol {symbol} repeats {by_bare[key]}"
                )
            by_bare[key] = symbol
        clash = _greedy_clash(frozenset(by_bare))
        if clash is not None:
            short, long = (by_bare[key] for key in clash)
            raise EmojiSetError(
                self.name,
                "ambiguous",
                f"{long} starts with {short} followed by other symbols; a guess would misread",
            )
        object.__setattr__(self, "_by_bare", MappingProxyType(by_bare))
        object.__setattr__(self, "_longest", max(len(key) for key in by_bare))

    def match(self, text: str, start: int) -> tuple[str, int] | None:
        """The symbol whose bare form is the longest prefix of ``text[start:]``, and where it ends.

        ``text`` must already be bare (see :func:`bare`); the symbol is returned as the set
        spells it. ``None`` when no symbol starts at ``start``.
        """
        for end in range(min(len(text), start + self._longest), start, -1):
            symbol = self._by_bare.get(text[start:end])
            if symbol is not None:
                return symbol, end
        return None


def _greedy_clash(keys: frozenset[str]) -> tuple[str, str] | None:
    """A pair (a, c) of bare symbols where greedy reading of "a, then more symbols" could take c."""
    for short in keys:
        for long in keys:
            is_longer = len(long) > len(short) and long.startswith(short)
            if is_longer and _starts_a_run(long[len(short) :], keys):
                return short, long
    return None


def _starts_a_run(rest: str, keys: frozenset[str]) -> bool:
    """Whether ``rest`` is a prefix of some concatenation of symbols (so ``a + rest`` can occur)."""
    if not rest:
        return True
    for key in keys:
        if key.startswith(rest):
            return True
        if rest.startswith(key) and _starts_a_run(rest[len(key) :], keys):
            return True
    return False


# Multi-code-point symbols are spelled with escapes, because ZWJ and U+FE0F are invisible.
_HEART: Final = "\u2764\ufe0f"  # ❤️ red heart + VS (in two sets)

CLASSIC: Final = EmojiSet(
    "classic",
    (
        "🍎", "🍌", "🍒", "🍇", "🐶", "🐱", "🦊", "🐸", "🐙", "🦋", "🌵", "🌻",
        "⚽", "🏀", "🎸", "🎲", "🚀", "🚲", "💎", "🔑", "🔥", "🌈", "⭐", _HEART,
    ),
)  # fmt: skip

FOOD: Final = EmojiSet(
    "food",
    (
        "🍎", "🍐", "🍊", "🍋", "🍌", "🍉", "🍇", "🍓", "🫐", "🍒", "🍑", "🥭",
        "🍍", "🥥", "🥝", "🍅", "🥑", "🥦", "🌽", "🥕", "🍕", "🍔", "🌮",
        "\U0001f336\ufe0f",  # 🌶️ hot pepper + VS
    ),
)  # fmt: skip

ANIMALS: Final = EmojiSet(
    "animals",
    (
        "🐶", "🐱", "🐭", "🐹", "🐰", "🦊", "🐻", "🐼", "🐨", "🐯", "🦁", "🐮",
        "🐷", "🐸", "🐵", "🐔", "🐧", "🦉", "🐴", "🦄", "🐝", "🐢",
        "\U0001f43b\u200d\u2744\ufe0f",  # 🐻‍❄️ polar bear: bear + ZWJ + snowflake + VS
        "\U0001f408\u200d\u2b1b",  # 🐈‍⬛ black cat: cat + ZWJ + black square
    ),
)  # fmt: skip

SPACE: Final = EmojiSet(
    "space",
    (
        "🚀", "🛸", "🪐", "🌍", "🌑", "🌓", "🌕", "🌙", "⭐", "🌟", "🌠", "🌌",
        "🔭", "👽", "👾",
        "\U0001f6f0\ufe0f",  # 🛰️ satellite + VS
        "\u2600\ufe0f",  # ☀️ sun + VS
        "\u2604\ufe0f",  # ☄️ comet + VS
        "\U0001f9d1",  # 🧑 person: a prefix of the four below, so longest match matters
        "\U0001f9d1\U0001f3fd",  # 🧑🏽 person + medium skin tone
        "\U0001f9d1\u200d\U0001f680",  # 🧑‍🚀 astronaut: person + ZWJ + rocket
        "\U0001f469\U0001f3fd\u200d\U0001f680",  # 👩🏽‍🚀 woman + skin tone + ZWJ + rocket
        "\U0001f468\U0001f3ff\u200d\U0001f680",  # 👨🏿‍🚀 man + dark skin tone + ZWJ + rocket
        "\U0001f9d1\U0001f3fb\u200d\U0001f680",  # 🧑🏻‍🚀 person + light skin tone + ZWJ + rocket
    ),
)  # fmt: skip

SIGNS: Final = EmojiSet(
    "signs",
    (
        "\U0001f44d",  # 👍 thumbs up: a prefix of the two below
        "\U0001f44d\U0001f3fd",  # 👍🏽 thumbs up + medium skin tone
        "\U0001f44d\U0001f3ff",  # 👍🏿 thumbs up + dark skin tone
        "\u270c\ufe0f",  # ✌️ victory hand + VS
        "\u270c\U0001f3fd",  # ✌🏽 victory hand + medium skin tone (no VS)
        "👋", "\U0001f44b\U0001f3fd", "🤞", "🫶", "👏", "🙌", "🙏",
        _HEART, "🧡", "💛", "💚", "💙", "💜", "🖤", "🤍",
        "\U0001f3f3\ufe0f",  # 🏳️ white flag + VS: a prefix of the rainbow flag
        "\U0001f3f3\ufe0f\u200d\U0001f308",  # 🏳️‍🌈 rainbow flag: white flag + VS + ZWJ + rainbow
        "\U0001f3f4\u200d\u2620\ufe0f",  # 🏴‍☠️ pirate flag: black flag + ZWJ + skull + VS
        "🏁",
    ),
)  # fmt: skip

DEFAULT_SET: Final = CLASSIC
"""The keyboard of a room that picked none."""

SETS: Final[Mapping[str, EmojiSet]] = MappingProxyType(
    {emoji_set.name: emoji_set for emoji_set in (CLASSIC, FOOD, ANIMALS, SPACE, SIGNS)}
)
"""Every shipped set by name (read-only)."""


def get_set(name: str) -> EmojiSet:
    """The shipped set called ``name``; :class:`EmojiSetError` (reason ``unknown``) otherwise."""
    try:
        return SETS[name]
    except KeyError:
        known = ", ".join(sorted(SETS))
        raise EmojiSetError(name, "unknown", f"no such set (known: {known})") from None

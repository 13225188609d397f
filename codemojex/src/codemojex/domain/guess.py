"""Reading a guess: the text a player sends (``/guess 🍎🍌…``, a bare message, with or without
spaces or commas) becomes :data:`CODE_LENGTH` keyboard symbols, or a :class:`GuessError`.

Symbols are read by greedy longest match against the keyboard, so a multi-code-point symbol
(skin tone, ZWJ sequence) is one symbol; a missing or extra U+FE0F is ignored.
"""

from __future__ import annotations

import unicodedata
from typing import Final

from codemojex.domain.emoji import CODE_LENGTH, VARIATION_SELECTOR, EmojiSet, is_separator
from codemojex.domain.errors import GuessError, GuessProblem

COMMAND: Final = "/guess"
"""The optional command prefix (any case, optionally ``@botname`` as Telegram sends in groups)."""

_ZWJ: Final = "\u200d"


def parse_guess(text: str, keyboard: EmojiSet, *, distinct: bool = True) -> tuple[str, ...]:
    """The symbols of ``text``, spelled as ``keyboard`` spells them.

    Refusals, in this order: text not on the keyboard (every such symbol is named, as typed),
    then no symbols at all (``empty``), then fewer or more than :data:`CODE_LENGTH`, then (with
    ``distinct``, as for every new guess) an emoji given twice (``repeated``, each one named):
    the secret is six distinct emojis. ``distinct=False`` reads a guess recorded before that
    rule.
    """
    body = _strip_command(text)
    # Drop U+FE0F but remember where each kept character was, to quote unknown symbols as typed.
    origin = [index for index, character in enumerate(body) if character != VARIATION_SELECTOR]
    plain = "".join(body[index] for index in origin)

    symbols: list[str] = []
    unknown: list[str] = []
    position = 0
    while position < len(plain):
        if is_separator(plain[position]):
            position += 1
            continue
        matched = keyboard.match(plain, position)
        if matched is not None:
            symbol, position = matched
            symbols.append(symbol)
            continue
        end = _unknown_end(plain, position, keyboard)
        typed = body[origin[position] : origin[end] if end < len(plain) else len(body)]
        if typed not in unknown:
            unknown.append(typed)
        position = end

    if unknown:
        raise GuessError(
            GuessProblem.UNKNOWN_SYMBOL,
            f"not on the {keyboard.name} keyboard: {', '.join(unknown)}",
            found=len(symbols),
            expected=CODE_LENGTH,
            unknown=tuple(unknown),
        )
    if not symbols:
        raise GuessError(
            GuessProblem.EMPTY,
            f"empty guess: send {CODE_LENGTH} emojis from the {keyboard.name} keyboard",
            expected=CODE_LENGTH,
        )
    if len(symbols) != CODE_LENGTH:
        problem = GuessProblem.TOO_FEW if len(symbols) < CODE_LENGTH else GuessProblem.TOO_MANY
        word = "few" if problem is GuessProblem.TOO_FEW else "many"
        raise GuessError(
            problem,
            f"too {word} emojis: found {len(symbols)}, need {CODE_LENGTH}",
            found=len(symbols),
            expected=CODE_LENGTH,
        )
    repeated = tuple(dict.fromkeys(s for s in symbols if symbols.count(s) > 1))
    if distinct and repeated:
        raise GuessError(
            GuessProblem.REPEATED,
            f"each emoji at most once (the code is {CODE_LENGTH} distinct emojis): "
            f"{' '.join(repeated)} repeated",
            found=len(symbols),
            expected=CODE_LENGTH,
            unknown=repeated,
        )
    return tuple(symbols)


def _strip_command(text: str) -> str:
    """``text`` without leading whitespace and an optional ``/guess`` or ``/guess@botname``."""
    body = text.lstrip()
    if body[: len(COMMAND)].lower() != COMMAND:
        return body
    body = body[len(COMMAND) :]
    if body.startswith("@"):
        end = 1
        while end < len(body) and _is_name_character(body[end]):
            end += 1
        body = body[end:]
    return body


def _is_name_character(character: str) -> bool:
    """Whether ``character`` may appear in a Telegram bot username (ASCII letters, digits, _)."""
    return character == "_" or (character.isascii() and character.isalnum())


def _unknown_end(plain: str, start: int, keyboard: EmojiSet) -> int:
    """Where the unknown text at ``start`` ends: one grapheme, or a whole word of letters/digits."""
    end = _grapheme_end(plain, start)
    if plain[start].isalnum():
        while end < len(plain) and plain[end].isalnum() and keyboard.match(plain, end) is None:
            end = _grapheme_end(plain, end)
    return end


def _grapheme_end(plain: str, start: int) -> int:
    """End of the grapheme cluster at ``start`` in U+FE0F-free text, for the emoji we meet.

    Covers what keyboards send: a regional-indicator pair (a flag), then any run of skin-tone
    modifiers, combining marks (keycaps, U+FE0E), tag characters (subdivision flags) and
    ZWJ + next character. Not full UAX #29, which the stdlib does not ship.
    """
    end = start + 1
    # A flag is two regional indicators; a lone one (or a third) stands alone.
    if end < len(plain) and all(_is_regional_indicator(c) for c in plain[start : end + 1]):
        end += 1
    while end < len(plain):
        character = plain[end]
        if character == _ZWJ:
            end = min(end + 2, len(plain))
        elif _extends(character):
            end += 1
        else:
            break
    return end


def _is_regional_indicator(character: str) -> bool:
    return "\U0001f1e6" <= character <= "\U0001f1ff"


def _extends(character: str) -> bool:
    """Whether ``character`` attaches to the one before it (never starts a symbol on its own)."""
    if "\U0001f3fb" <= character <= "\U0001f3ff":  # skin-tone modifiers
        return True
    if "\U000e0020" <= character <= "\U000e007f":  # tag characters
        return True
    return unicodedata.category(character) in {"Mn", "Me", "Mc"}

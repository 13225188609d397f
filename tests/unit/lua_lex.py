"""Lua source as tokens: names, decoded strings, numbers and operators, with ``KEYS[<i>]`` read as
one token; whitespace and comments are dropped. Also the keyword and operator sets of the language.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LUA_KEYWORDS = """and break do else elseif end false for function goto if in local nil not or
repeat return then true until while"""
KEYWORDS = frozenset(_LUA_KEYWORDS.split())
ARITH = frozenset({"+", "-", "*", "/", "//", "%", "^"})
UNARY = frozenset({"-", "#", "~", "not"})
OPEN = {"(": ")", "[": "]", "{": "}"}
# An expression that goes on after these is not a plain value (`local x = a or b`).
CONTINUES = frozenset({"and", "or", "==", "~=", "<", ">", "<=", ">="})

_LEX = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<comment>--(?:\[(?P<ceq>=*)\[.*?\](?P=ceq)\]|[^\n]*))
    | (?P<long>\[(?P<leq>=*)\[.*?\](?P=leq)\])
    | (?P<str>'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")
    | (?P<num>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
    | (?P<name>[A-Za-z_]\w*)
    | (?P<op>\.\.\.|\.\.|==|~=|<=|>=|//|::|<<|>>|[-+*/%^\#&~|<>=(){}\[\];:,.])
    """,
    re.X | re.S,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


@dataclass(frozen=True, slots=True)
class Tok:
    kind: str  # name, str, num, op, keys (`KEYS[<index>]` as one token)
    text: str  # a string's decoded value; `KEYS[1]` / `KEYS[i]` for keys
    line: int


def _decode(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        c = m.group(1)
        return chr(int(c)) if c.isdigit() else _ESCAPES.get(c, c)

    return re.sub(r"\\(\d{1,3}|.)", one, body, flags=re.S)


def tokenize(name: str, source: str) -> list[Tok]:
    toks: list[Tok] = []
    pos, line = 0, 1
    while pos < len(source):
        m = _LEX.match(source, pos)
        if m is None:
            raise ValueError(f"{name}:{line}: cannot read {source[pos : pos + 20]!r}")
        text = m.group()
        if m.group("str") is not None:
            toks.append(Tok("str", _decode(text[1:-1]), line))
        elif m.group("long") is not None:
            body = text[len(m.group("leq")) + 2 : -len(m.group("leq")) - 2]
            toks.append(Tok("str", body.removeprefix("\n"), line))
        else:
            for kind in ("num", "name", "op"):
                if m.group(kind) is not None:
                    toks.append(Tok(kind, text, line))
        line += text.count("\n")
        pos = m.end()
    return _join_keys(toks)


def _join_keys(toks: list[Tok]) -> list[Tok]:
    """``KEYS [ 1 ]`` and ``KEYS [ i ]`` as one ``keys`` token."""
    out: list[Tok] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if (
            t.kind == "name"
            and t.text == "KEYS"
            and i + 3 < len(toks)
            and toks[i + 1].text == "["
            and toks[i + 2].kind in ("num", "name")
            and toks[i + 3].text == "]"
        ):
            out.append(Tok("keys", f"KEYS[{toks[i + 2].text}]", t.line))
            i += 4
        else:
            out.append(t)
            i += 1
    return out

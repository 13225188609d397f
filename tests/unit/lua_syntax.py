"""A tokenized Lua file read as far as the key analysis needs: its ``-- KEYS[i] <role>`` header,
its bracket pairs, which names are table fields, the scope every name resolves in, the functions
it defines, and where an expression ends. Nothing here knows about keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lua_lex import ARITH, KEYWORDS, OPEN, UNARY, Tok, tokenize


@dataclass(eq=False)
class Scope:
    parent: Scope | None
    names: set[str] = field(default_factory=set)


#: A variable: the scope that declares it (None for a global) and its name.
Binding = tuple[Scope | None, str]


@dataclass(eq=False)
class LuaFile:
    name: str
    toks: list[Tok]
    header: dict[str, tuple[str, str | None]]  # "KEYS[1]" -> (role, type named in the header)
    match: dict[int, int] = field(default_factory=dict)  # open bracket -> its close
    fields: set[int] = field(default_factory=set)  # names that are table fields, not variables
    scope_at: list[Scope] = field(default_factory=list)
    decl_at: dict[int, Scope] = field(default_factory=dict)  # declared names -> their scope
    heads: set[int] = field(default_factory=set)  # `(` of function definitions

    def variable(self, i: int) -> bool:
        t = self.toks[i]
        return (
            t.kind == "name"
            and t.text not in KEYWORDS
            and t.text != "KEYS"
            and i not in self.fields
        )

    def binding(self, i: int) -> Binding:
        name = self.toks[i].text
        if i in self.decl_at:
            return (self.decl_at[i], name)
        scope: Scope | None = self.scope_at[i]
        while scope is not None:
            if name in scope.names:
                return (scope, name)
            scope = scope.parent
        return (None, name)

    def generic(self) -> tuple[str, str | None] | None:
        """The header's entry for ``KEYS[<a variable>]``, if it declares one."""
        return next((v for k, v in self.header.items() if not k[5:-1].isdigit()), None)

    def at(self, i: int) -> str:
        return f"{self.name}:{self.toks[i].line}"

    def text(self, a: int, b: int) -> str:
        return " ".join(t.text for t in self.toks[a:b])

    # where expressions end

    def primary(self, i: int) -> int | None:
        toks, n = self.toks, len(self.toks)
        if i >= n:
            return None
        t = toks[i]
        if t.kind in ("str", "num") or t.text in ("nil", "true", "false", "..."):
            return i + 1
        if t.text == "{":
            return self.match[i] + 1
        if t.kind == "keys" or (t.kind == "name" and t.text not in KEYWORDS):
            j = i + 1
        elif t.text == "(":
            j = self.match[i] + 1
        else:
            return None
        while j < n:
            u = toks[j]
            if u.text in (".", ":") and j + 1 < n and toks[j + 1].kind == "name":
                j += 2
            elif u.kind == "op" and u.text in OPEN:
                j = self.match[j] + 1
            elif u.kind == "str":
                j += 1
            else:
                break
        return j

    def operand(self, i: int) -> int | None:
        """The end of the operand of `..` starting at i (unary and arithmetic bind tighter)."""
        toks = self.toks
        while i < len(toks) and toks[i].text in UNARY and toks[i].kind in ("op", "name"):
            i += 1
        j = self.primary(i)
        while j is not None and j < len(toks) and toks[j].kind == "op" and toks[j].text in ARITH:
            k = j + 1
            while k < len(toks) and toks[k].text in UNARY:
                k += 1
            nxt = self.primary(k)
            if nxt is None:
                break
            j = nxt
        return j

    def expr(self, i: int) -> int | None:
        """The end of an operand or a concatenation starting at i."""
        e = self.operand(i)
        while e is not None and e < len(self.toks) and self.toks[e].text == "..":
            e = self.operand(e + 1)
        return e

    def split(self, a: int, b: int) -> list[tuple[int, int]]:
        """Comma-separated parts of tokens [a, b) at their own bracket depth."""
        parts, start, k = [], a, a
        while k < b:
            t = self.toks[k]
            if t.kind == "op" and t.text in OPEN:
                k = self.match[k] + 1
                continue
            if t.text == ",":
                parts.append((start, k))
                start = k + 1
            k += 1
        if start < b:
            parts.append((start, b))
        return parts


Src = tuple[LuaFile, int, int]  # a value: tokens [a, b) of a file


@dataclass(eq=False)
class Func:
    file: LuaFile
    params: list[Binding]
    body: int  # its first token after the parameters
    end: int = -1  # its `end`


def read(name: str, source: str, scope: Scope, funcs: dict[Binding, Func]) -> LuaFile:
    """One file whose top-level names live in ``scope``; the functions it names go into funcs."""
    f = LuaFile(name, tokenize(name, source), _header(source))
    _brackets(f)
    _scopes(f, scope, funcs)
    return f


_HEADER = re.compile(r"^--\s+(KEYS\[(\w+)\])\s+(\w+)(.*)$")
_TYPE = re.compile(r"\((STRING|HASH|LIST|SET|ZSET)\b")


def _header(source: str) -> dict[str, tuple[str, str | None]]:
    found: dict[str, tuple[str, str | None]] = {}
    for line in source.splitlines():
        if not line.startswith("--"):
            break
        if m := _HEADER.match(line):
            t = _TYPE.search(m.group(4))
            found[m.group(1)] = (m.group(3), t.group(1) if t else None)
    return found


def _brackets(f: LuaFile) -> None:
    stack: list[int] = []
    for i, t in enumerate(f.toks):
        if t.kind != "op":
            continue
        if t.text in OPEN:
            stack.append(i)
        elif t.text in OPEN.values():
            if not stack or OPEN[f.toks[stack[-1]].text] != t.text:
                raise ValueError(f"{f.at(i)}: unbalanced {t.text!r}")
            f.match[stack.pop()] = i
    if stack:
        raise ValueError(f"{f.at(stack[-1])}: unclosed {f.toks[stack[-1]].text!r}")
    inside: list[str] = []
    for i, t in enumerate(f.toks):
        prev = f.toks[i - 1].text if i else ""
        member = prev in (".", ":")  # t.field, t:method
        key = (  # {field = value}
            inside[-1:] == ["{"]
            and prev in ("{", ",", ";")
            and i + 1 < len(f.toks)
            and f.toks[i + 1].text == "="
        )
        if t.kind == "name" and (member or key):
            f.fields.add(i)
        if t.kind == "op" and t.text in OPEN:
            inside.append(t.text)
        elif t.kind == "op" and t.text in OPEN.values():
            inside.pop()


@dataclass
class _Frame:
    scope: Scope
    func: Func | None
    blocks: int  # blocks open in it


def _scopes(f: LuaFile, main: Scope, funcs: dict[Binding, Func]) -> None:
    toks = f.toks
    f.scope_at = [main] * len(toks)
    frames = [_Frame(main, None, 0)]

    def declare(i: int, scope: Scope) -> None:
        scope.names.add(toks[i].text)
        f.decl_at[i] = scope

    i = 0
    while i < len(toks):
        t = toks[i]
        scope = frames[-1].scope
        f.scope_at[i] = scope
        if t.kind == "name" and t.text == "function":
            j, named = i + 1, None
            if toks[j].kind == "name":
                named = j
                j += 1
                while toks[j].text in (".", ":"):
                    named = None  # a method or a field: no variable is declared
                    j += 2
            if toks[j].text != "(":
                raise ValueError(f"{f.at(i)}: cannot read this function's parameters")
            inner = Scope(scope)
            params: list[Binding] = []
            f.heads.add(j)
            close = f.match[j]
            for k in range(i, close + 1):
                f.scope_at[k] = scope
            for k in range(j + 1, close):
                if toks[k].kind == "name":
                    declare(k, inner)
                    params.append((inner, toks[k].text))
            func = Func(f, params, close + 1)
            if named is not None:
                declare(named, scope)
                funcs[(scope, toks[named].text)] = func
            elif toks[i - 1].text == "=" and i >= 3 and toks[i - 3].text == "local":
                funcs[(scope, toks[i - 2].text)] = func
            frames.append(_Frame(inner, func, 1))
            i = close + 1
            continue
        if t.kind == "name" and t.text == "local" and toks[i + 1].text != "function":
            j = i + 1
            while True:
                declare(j, scope)
                if toks[j + 1].text != ",":
                    break
                j += 2
        elif t.kind == "name" and t.text == "for":
            j = i + 1
            while toks[j].text not in ("in", "="):
                if toks[j].kind == "name":
                    declare(j, scope)
                j += 1
        elif t.kind == "name" and t.text in ("if", "do", "repeat"):
            frames[-1].blocks += 1
        elif t.kind == "name" and t.text in ("end", "until"):
            frames[-1].blocks -= 1
            if frames[-1].blocks == 0 and frames[-1].func is not None:
                frames[-1].func.end = i
                frames.pop()
        i += 1

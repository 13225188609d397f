"""Every key the Lua scripts build, followed from the ``KEYS`` their headers declare through
assignments and calls into the library helpers (``_*.lua``), held to ``_keys.LAYOUT`` and to the
type its command needs. A key is a concatenation that starts at a key: literal pieces stay, a
variable piece is a placeholder or, when bounded to a few literals, each of them; a key used any
other way is a problem, never a miss.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lua_lex import CONTINUES, KEYWORDS, OPEN
from lua_syntax import Binding, Func, LuaFile, Scope, Src, read

from echomq.engine import keys as _keys
from echomq.engine.keys import LAYOUT, QUEUE_ROOT

LUA_DIR = Path(_keys.__file__).parent / "lua"

SHAPES = {shape.pattern: shape for shape in LAYOUT}

#: What a script header's ``-- KEYS[i] <role>`` names: the shape of that key.
KEYS_ROLES = {"root": QUEUE_ROOT, "nodes": "{emq}:nodes", "bucket": "emqb:{<tag>}:<name>"}

#: The Valkey type a command's first key must have, by type.
TYPED_COMMANDS = {
    "STRING": "GET SET INCR INCRBY DECR DECRBY GETDEL GETBIT GETRANGE",
    "HASH": "HSET HGET HMGET HDEL HINCRBY HGETALL HKEYS HEXISTS HLEN HRANDFIELD",
    "LIST": "LPUSH RPUSH LPOP RPOP LREM LPOS LLEN LINDEX LMOVE LTRIM LRANGE BLPOP",
    "SET": "SADD SREM SISMEMBER SMEMBERS SCARD",
    "ZSET": "ZADD ZREM ZCARD ZRANGE ZPOPMIN ZSCORE ZMSCORE ZRANK ZCOUNT ZINCRBY ZREMRANGEBYSCORE",
}
COMMAND_TYPES = {c: typ for typ, commands in TYPED_COMMANDS.items() for c in commands.split()}
#: Commands whose first argument is a key of any type.
KEY_COMMANDS = set(COMMAND_TYPES) | {"DEL", "UNLINK", "EXISTS", "PEXPIRE", "EXPIRE", "PTTL", "TTL"}
#: Commands whose every argument is a key; LMOVE's first two are.
ALL_KEYS = {"DEL", "UNLINK", "EXISTS"}
#: Commands without keys.
NO_KEYS = {"TIME"}
#: Commands that name a shard channel rather than a key, and the argument that does: a channel
#: is held to LAYOUT like a key (its name is a shape's), without a type.
CHANNEL_COMMANDS = {"SPUBLISH": 1, "PUBSUB": 2}

REDIS_CALLS = ("redis.call", "redis.pcall")


@dataclass(frozen=True)
class Call:
    file: LuaFile
    paren: int
    callee: str  # "redis.call", a variable's name, or "" for an expression
    func: Func | None
    args: list[tuple[int, int]]


@dataclass(frozen=True)
class Use:
    pattern: str
    file: str
    how: str  # "key", "KEYS", "whole"


def _pattern_tokens(pattern: str) -> tuple[tuple[str, str], ...]:
    parts = re.split(r"<(\w+)>", pattern)
    return tuple(
        ("hole" if i % 2 else "lit", part) for i, part in enumerate(parts) if i % 2 or part
    )


SHAPE_TOKENS = {shape.pattern: _pattern_tokens(shape.pattern) for shape in LAYOUT}


def _render(seq: list[tuple[str, object]]) -> str:
    out = []
    for kind, value in seq:
        if kind == "lit":
            out.append(str(value))
        elif kind == "hole":
            out.append(f"<{value}>")
        else:
            out.append(f"<{value[1]}>" if isinstance(value, tuple) else "<expr>")
    return "".join(out)


class Analysis:
    """Every key the Lua sources build, how, and what does not fit ``LAYOUT``."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self.problems: list[tuple[str, str]] = []  # (kind, "file:line: what")
        self.uses: list[Use] = []
        self.keys_found: list[tuple[str, str, str]] = []  # (file:line, rendered, pattern)
        self.funcs: dict[Binding, Func] = {}
        self.calls: list[Call] = []
        self.chains: dict[tuple[LuaFile, int, int], list[tuple[int, int]]] = {}
        self.sources: dict[Binding, list[Src | None]] = defaultdict(list)
        self.compared: dict[Binding, set[str]] = defaultdict(set)
        self.followed: set[tuple[LuaFile, int]] = set()
        self.roles: dict[Binding, set[str]] = defaultdict(set)
        self.resolved: dict[tuple[LuaFile, int, int], list[str] | None] = {}
        self.shapes: dict[Binding, frozenset[str] | None] = {}

        lib = Scope(None)  # the helpers' names are seen by every script
        self.files = [
            read(name, sources[name], lib if name.startswith("_") else Scope(lib), self.funcs)
            for name in sorted(sources, key=lambda n: (not n.startswith("_"), n))
        ]
        for f in self.files:
            self._concatenations(f)
            self._calls(f)
            self._assignments(f)
        self._roles()
        for f in self.files:
            self._follow(f)
        for (f, a, b), pieces in self.chains.items():
            self.resolved[(f, a, b)] = self._chain(f, pieces)
        self._shapes()
        self._commands()
        self._headers()

    def problems_of(self, *kinds: str) -> list[str]:
        return [text for kind, text in self.problems if kind in kinds]

    def touched(self) -> dict[str, set[str]]:
        """Each touched pattern and the files that touch it."""
        out: dict[str, set[str]] = defaultdict(set)
        for use in self.uses:
            out[use.pattern].add(use.file)
        return out

    # facts: the values each variable can take, and the tokens a key can be read off

    def _concatenations(self, f: LuaFile) -> None:
        toks = f.toks
        covered: set[int] = set()
        for i in range(len(toks)):
            if i in covered:
                continue
            e = f.operand(i)
            if e is None or e >= len(toks) or toks[e].text != "..":
                continue
            pieces = [(i, e)]
            while e is not None and e < len(toks) and toks[e].text == "..":
                s = e + 1
                e = f.operand(s)
                if e is None:
                    self.problems.append(("parse", f"{f.at(s)}: cannot read this concatenation"))
                    break
                pieces.append((s, e))
            for a, b in pieces:
                k = a
                while k < b:
                    covered.add(k)
                    k = f.match[k] + 1 if toks[k].kind == "op" and toks[k].text in OPEN else k + 1
            self.chains[(f, pieces[0][0], pieces[-1][1])] = pieces
            a, b = pieces[0]
            if b - a == 1:
                self.followed.add((f, a))

    def _calls(self, f: LuaFile) -> None:
        toks = f.toks
        for p, t in enumerate(toks):
            if t.text != "(" or t.kind != "op" or p in f.heads or p == 0:
                continue
            prev = toks[p - 1]
            if prev.kind == "name" and prev.text in KEYWORDS:
                continue
            if not (prev.kind == "name" or prev.text in (")", "]")):
                continue
            callee, func = "", None
            if prev.kind == "name" and p >= 3 and toks[p - 2].text in (".", ":"):
                callee = toks[p - 3].text + toks[p - 2].text + prev.text
            elif prev.kind == "name" and f.variable(p - 1):
                callee = prev.text
                func = self.funcs.get(f.binding(p - 1))
            args = f.split(p + 1, f.match[p])
            self.calls.append(Call(f, p, callee, func, args))
            params = func.params if func is not None else []
            for k, (a, b) in enumerate(args):
                if k < len(params):
                    self.sources[params[k]].append((f, a, b))
                # Followed: an argument of a known function, a key of a command, ipairs(KEYS).
                if b - a == 1 and (
                    k < len(params)
                    or (callee in REDIS_CALLS and k >= 1)
                    or (callee == "ipairs" and toks[a].text == "KEYS")
                ):
                    self.followed.add((f, a))
            for param in params[len(args) :]:
                self.sources[param].append(None)

    def _assignments(self, f: LuaFile) -> None:
        toks = f.toks
        for i, t in enumerate(toks):
            if t.kind == "name" and t.text == "local" and toks[i + 1].text != "function":
                self._local(f, i)
            elif t.kind == "name" and t.text == "for":
                self._for(f, i)
            elif f.variable(i) and i not in f.decl_at and i + 1 < len(toks):
                if toks[i + 1].text == "=":  # a plain assignment: its value is not followed
                    self.sources[f.binding(i)].append(None)
                if toks[i + 1].text in ("==", "~=") and toks[i + 2].kind == "str":
                    self.compared[f.binding(i)].add(toks[i + 2].text)
                if i >= 2 and toks[i - 1].text in ("==", "~=") and toks[i - 2].kind == "str":
                    self.compared[f.binding(i)].add(toks[i - 2].text)
        for i in f.decl_at:
            self.followed.add((f, i))
        for i, t in enumerate(toks):
            if t.text == "KEYS" and i and toks[i - 1].text == "#":
                self.followed.add((f, i))

    def _local(self, f: LuaFile, i: int) -> None:
        """``local a, b = x, y``: each name gets its plain value, or None."""
        toks = f.toks
        lhs = [i + 1]
        while toks[lhs[-1] + 1].text == ",":
            lhs.append(lhs[-1] + 2)
        eq = lhs[-1] + 1
        rhs: list[tuple[int, int]] = []
        if eq < len(toks) and toks[eq].text == "=":
            start = eq + 1
            while (end := f.expr(start)) is not None:
                rhs.append((start, end))
                if end < len(toks) and toks[end].text == ",":
                    start = end + 1
                    continue
                if end < len(toks) and toks[end].text in CONTINUES:
                    rhs.pop()  # `a or b`: not a plain value
                break
        for k, j in enumerate(lhs):
            src = (f, *rhs[k]) if k < len(rhs) else None
            self.sources[f.binding(j)].append(src)
            if src is not None and src[2] - src[1] == 1:
                self.followed.add((f, src[1]))

    def _for(self, f: LuaFile, i: int) -> None:
        """``for _, v in ipairs({...})`` or ``ipairs(KEYS)``: v is each item; else unknown."""
        toks = f.toks
        names = []
        j = i + 1
        while toks[j].text not in ("in", "="):
            if toks[j].kind == "name":
                names.append(j)
            j += 1
        values: list[Src | None] = [None]
        if (
            toks[j].text == "in"
            and toks[j + 1].text == "ipairs"
            and toks[j + 2].text == "("
            and len(names) == 2
        ):
            inner = f.split(j + 3, f.match[j + 2])
            if len(inner) == 1:
                a, b = inner[0]
                if toks[a].text == "{" and f.match[a] == b - 1:
                    values = [(f, x, y) for x, y in f.split(a + 1, b - 1)]
                elif b - a == 1 and toks[a].text == "KEYS":
                    values = [(f, a, b)]
        for k, n in enumerate(names):
            for src in values if k == len(names) - 1 else [None]:
                self.sources[f.binding(n)].append(src)

    # keys

    def _token_role(self, f: LuaFile, i: int) -> str | None:
        t = f.toks[i]
        if t.kind == "keys" or (t.kind == "name" and t.text == "KEYS"):
            # KEYS[1], or KEYS[n] / KEYS of a header that declares KEYS[i]
            entry = f.header.get(t.text) or f.generic()
            return entry[0] if entry else None
        if f.variable(i):
            roles = self.roles.get(f.binding(i))
            return min(roles) if roles else None
        return None

    def _roles(self) -> None:
        for f in self.files:  # the library's convention: a `root` is the queue root
            for i in f.decl_at:
                if f.toks[i].text == "root":
                    self.roles[f.binding(i)].add("root")
        changed = True
        while changed:
            changed = False
            for b, srcs in list(self.sources.items()):
                for src in srcs:
                    if src is None or src[2] - src[1] != 1:
                        continue
                    role = self._token_role(src[0], src[1])
                    if role is not None and role not in self.roles[b]:
                        self.roles[b].add(role)
                        changed = True
        for (_, name), roles in self.roles.items():
            if len(roles) > 1:
                self.problems.append(("escape", f"`{name}` is both {' and '.join(sorted(roles))}"))

    def _follow(self, f: LuaFile) -> None:
        generic = f.generic() is not None
        for i, t in enumerate(f.toks):
            if t.kind == "keys":
                if t.text not in f.header and not generic:
                    self.problems.append(("KEYS", f"{f.at(i)}: {t.text} is not in the header"))
            elif t.kind == "name" and t.text == "KEYS" and not generic:
                self.problems.append(("KEYS", f"{f.at(i)}: KEYS[i] is not in the header"))
            elif not (f.variable(i) and self._token_role(f, i)):
                continue
            if (f, i) not in self.followed:
                self.problems.append(
                    ("escape", f"{f.at(i)}: `{t.text}` is used where no key can be read off it")
                )

    def _enum(self, b: Binding) -> set[str]:
        values = set(self.compared.get(b, ()))
        srcs = self.sources.get(b, [])
        if srcs and all(s is not None and s[2] - s[1] == 1 for s in srcs):
            toks = [s[0].toks[s[1]] for s in srcs if s is not None]
            if all(t.kind == "str" for t in toks):
                values |= {t.text for t in toks}
        return values

    def _chain(self, f: LuaFile, pieces: list[tuple[int, int]]) -> list[str] | None:
        a, b = pieces[0]
        role = self._token_role(f, a) if b - a == 1 else None
        if role is None:
            for x, y in pieces[1:]:
                if y - x == 1 and self._token_role(f, x):
                    self.problems.append(
                        ("escape", f"{f.at(x)}: a key must start at `{f.toks[x].text}`")
                    )
            return None
        if role not in KEYS_ROLES:
            return None
        seq: list[tuple[str, object]] = list(_pattern_tokens(KEYS_ROLES[role]))
        for x, y in pieces[1:]:
            t = f.toks[x]
            if y - x == 1 and t.kind == "str":
                seq.append(("lit", t.text))
            elif y - x == 1 and self._token_role(f, x):
                self.problems.append(("escape", f"{f.at(x)}: a key must start at `{t.text}`"))
                return None
            elif y - x == 1 and f.variable(x):
                seq.append(("var", f.binding(x)))
            else:
                seq.append(("var", None))
        matched, missed = self._match(seq)
        for text in missed:
            self.problems.append(("key", f"{f.at(a)}: {text} is not a LAYOUT shape"))
        for pattern in matched:
            self.uses.append(Use(pattern, f.name, "key"))
            self.keys_found.append((f.at(a), f.text(a, pieces[-1][1]), pattern))
        return None if missed else matched

    def _match(self, seq: list[tuple[str, object]]) -> tuple[list[str], list[str]]:
        norm: list[tuple[str, object]] = []
        for kind, value in seq:
            if kind == "lit" and norm and norm[-1][0] == "lit":
                norm[-1] = ("lit", str(norm[-1][1]) + str(value))
            elif not (kind == "lit" and value == ""):
                norm.append((kind, value))
        found = [
            pattern
            for pattern, shape in SHAPE_TOKENS.items()
            if len(shape) == len(norm)
            and all(
                (k1 == "lit" and k2 == "lit" and v1 == v2) or (k1 != "lit" and k2 == "hole")
                for (k1, v1), (k2, v2) in zip(norm, shape, strict=True)
            )
        ]
        if len(found) == 1:
            return found, []
        for idx, (kind, value) in enumerate(seq):
            if kind == "var" and isinstance(value, tuple) and (values := self._enum(value)):
                matched, missed = [], []
                for literal in sorted(values):
                    m, u = self._match([*seq[:idx], ("lit", literal), *seq[idx + 1 :]])
                    matched += m
                    missed += u
                return matched, missed
        return [], [_render(seq) + (" (fits several shapes)" if found else "")]

    def _shapes_of(self, src: Src | None, depth: int = 0) -> frozenset[str] | None:
        """The shapes a value can be: None when unknown."""
        if src is None or depth > 8:
            return None
        f, a, b = src
        if (f, a, b) in self.resolved:
            found = self.resolved[(f, a, b)]
            return frozenset(found) if found else None
        if b - a == 1:
            role = self._token_role(f, a)
            if role in KEYS_ROLES:
                return frozenset({KEYS_ROLES[role]})
            if f.variable(a):
                return self.shapes.get(f.binding(a), frozenset())
            return None
        if f.variable(a) and f.toks[a + 1].text == "(" and f.match[a + 1] == b - 1:
            func = self.funcs.get(f.binding(a))
            if func is not None and func.file.toks[func.body].text == "return":
                ret = (func.file, func.body + 1, func.end)
                if func.file.expr(func.body + 1) == func.end:
                    return self._shapes_of(ret, depth + 1)
        return None

    def _shapes(self) -> None:
        changed = True
        while changed:
            changed = False
            for b, srcs in list(self.sources.items()):
                acc: frozenset[str] | None = frozenset()
                for src in srcs:
                    s = self._shapes_of(src)
                    acc = None if s is None or acc is None else acc | s
                if self.shapes.get(b, frozenset()) != acc:
                    self.shapes[b] = acc
                    changed = True

    # commands and headers

    def _commands(self) -> None:
        for call in self.calls:
            if call.callee not in REDIS_CALLS or not call.args:
                continue
            f = call.file
            a, b = call.args[0]
            if b - a != 1 or f.toks[a].kind != "str":
                self.problems.append(("command", f"{f.at(a)}: a command the checker cannot read"))
                continue
            command = f.toks[a].text.upper()
            if command in NO_KEYS:
                continue
            if command in CHANNEL_COMMANDS:
                at = CHANNEL_COMMANDS[command]
                if len(call.args) > at:
                    self._command_key(f, command, *call.args[at])
                continue
            if command not in KEY_COMMANDS:
                self.problems.append(
                    ("command", f"{f.at(a)}: {command} is in no table of this test: add it")
                )
                continue
            for s, e in call.args[1:]:
                role = self._token_role(f, s) if e - s == 1 else None
                if role in KEYS_ROLES:
                    self.uses.append(Use(KEYS_ROLES[role], f.name, "whole"))
            count = len(call.args) if command in ALL_KEYS else 3 if command == "LMOVE" else 2
            for x, y in call.args[1:count]:
                self._command_key(f, command, x, y)

    def _command_key(self, f: LuaFile, command: str, x: int, y: int) -> None:
        if y - x == 1 and f.toks[x].kind == "str":
            self.problems.append(("key", f"{f.at(x)}: {command} of a literal key"))
            return
        shapes = self._shapes_of((f, x, y))
        if not shapes:
            self.problems.append(
                ("key", f"{f.at(x)}: {command} of `{f.text(x, y)}`, which no KEYS leads to")
            )
            return
        want = COMMAND_TYPES.get(command)
        for pattern in sorted(shapes):
            if want and SHAPES[pattern].type != want:
                self.problems.append(
                    (
                        "type",
                        f"{f.at(x)}: {command} ({want}) on {pattern}, a {SHAPES[pattern].type}",
                    )
                )

    def _headers(self) -> None:
        for f in self.files:
            for entry, (role, typ) in f.header.items():
                if role not in KEYS_ROLES:
                    self.problems.append(("KEYS", f"{f.name}: {entry} {role}: no such key role"))
                    continue
                pattern = KEYS_ROLES[role]
                self.uses.append(Use(pattern, f.name, "KEYS"))
                if typ is not None and typ != SHAPES[pattern].type:
                    self.problems.append(
                        (
                            "type",
                            f"{f.name}: {entry} is a {typ}, {pattern} a {SHAPES[pattern].type}",
                        )
                    )


def lua_sources(folder: Path = LUA_DIR) -> dict[str, str]:
    return {path.name: path.read_text("utf-8") for path in sorted(folder.glob("*.lua"))}


@functools.cache
def analysis() -> Analysis:
    """The analysis of the scripts as they are, shared by the tests of a process."""
    return Analysis(lua_sources())

"""The key layout, held together: every key the Lua scripts under src/echomq/engine/lua touch (as
``lua_keys`` reads them) must be a ``_keys.LAYOUT`` shape, traced to a declared ``KEYS`` entry and
of the type its command needs, and every shape is touched by a script or marked ``host_only`` and
used by the Python code. ``Keyspace`` and docs/reference/keyspace.md are held to ``LAYOUT`` as
well, and ``test_the_checker_flags_*`` proves the checker bites: a script that builds
``root .. 'new'`` without declaring it in ``LAYOUT`` fails here.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from lua_keys import KEYS_ROLES, SHAPES, Analysis, analysis, lua_sources

from echomq.engine import ids as _ids
from echomq.engine import keys as _keys
from echomq.engine.keys import LAYOUT, QUEUE_ROOT, Keyspace

ROOT_DIR = Path(__file__).resolve().parents[2]
SRC_DIR = Path(_keys.__file__).parents[1]
REFERENCE = ROOT_DIR / "docs" / "reference" / "keyspace.md"

#: A value per placeholder name (the builder's parameter name).
SAMPLES = {
    "q": "orders",
    "id": _ids.encode("JOB", 274_557_032_793_636_864),
    "group": "vip",
    "key": "k1",
    "tag": "orders",
    "name": "global",
    "band": "7",
}

#: ``Keyspace`` members that are not keys.
NOT_KEYS = {"for_queue", "all_fixed"}


# --- the scripts against LAYOUT ----------------------------------------------------------------


def test_every_key_a_script_builds_is_a_layout_shape() -> None:
    assert analysis().problems_of("key") == []


def test_the_checker_can_follow_every_key_a_script_is_given() -> None:
    assert analysis().problems_of("escape", "parse") == []


def test_scripts_use_only_the_keys_their_header_declares() -> None:
    assert analysis().problems_of("KEYS") == []


def test_commands_fit_the_type_of_their_key() -> None:
    assert analysis().problems_of("type", "command") == []


def test_the_extraction_finds_keys_in_every_script_and_in_the_helpers() -> None:
    found = analysis()
    touched = found.touched()
    scripts = [name for name in lua_sources() if not name.startswith("_")]
    assert scripts
    for name in scripts:
        assert any(name in files for files in touched.values()), f"{name} touches no key"
    assert any(where.startswith("_lib.lua:") for where, _, _ in found.keys_found)


def _python_sources() -> dict[Path, str]:
    return {path: path.read_text("utf-8") for path in sorted(SRC_DIR.rglob("*.py"))}


def _python_reference(source: str) -> re.Pattern[str]:
    if source.startswith("Keyspace."):
        return re.compile(rf"\bkeys\.{source.removeprefix('Keyspace.')}\b")
    return re.compile(rf"\b{source.rsplit('.', 1)[-1]}\b")


def _defined_in(source: str) -> Path:
    module = source.rpartition(".")[0]
    module = "echomq.engine.keys" if module in ("", "Keyspace") else module
    return SRC_DIR / (module.replace(".", "/") + ".py")


def _host_users(shape: _keys.KeyShape, python: dict[Path, str]) -> list[Path]:
    # The layout names every builder (each shape's ``source``) without using one.
    home, reference = _defined_in(shape.source), _python_reference(shape.source)
    skipped = {home, SRC_DIR / "engine" / "layout.py"}
    return [path for path, text in python.items() if path not in skipped and reference.search(text)]


def test_every_shape_is_touched_by_a_script_or_marked_host_only_and_used_by_the_host() -> None:
    touched = analysis().touched()
    python = _python_sources()
    for shape in LAYOUT:
        if shape.planned:
            continue
        if not shape.host_only:
            assert shape.pattern in touched, f"no script touches {shape.pattern}: host_only?"
            continue
        assert shape.pattern not in touched, (
            f"{shape.pattern} is marked host_only, but {sorted(touched[shape.pattern])} touch it"
        )
        assert _host_users(shape, python), f"nothing uses the host-only {shape.pattern}"


def test_a_planned_shape_is_touched_by_nothing_until_its_landing_takes_the_mark_off() -> None:
    # docs/concepts/shards.md lays out a sharded queue's keys before the landings that use them:
    # the first script or host code to touch one must take its `planned` mark off, so the
    # checks above hold it from then on.
    touched = analysis().touched()
    python = _python_sources()
    planned = [shape for shape in LAYOUT if shape.planned]  # none left once landing 6 wrote all
    for shape in planned:
        assert shape.planned in {str(n) for n in range(1, 9)}, shape.pattern
        assert not shape.host_only, shape.pattern
        assert shape.pattern not in touched, (
            f"{shape.pattern} is planned, but {sorted(touched[shape.pattern])} touch it"
        )
        users = _host_users(shape, python)
        assert not users, f"{shape.pattern} is planned, but {users} use it"


def test_the_script_headers_name_known_key_roles() -> None:
    assert set(KEYS_ROLES.values()) <= set(SHAPES)
    roles = {role for f in analysis().files for role, _ in f.header.values()}
    assert roles <= set(KEYS_ROLES)


# --- the checker bites --------------------------------------------------------------------------

PROBE = "-- probe.lua: a script added by the test.\n-- KEYS[1] root   `emq:{q}:`\n"
PROBE_BODY = "local root, g, field = KEYS[1], ARGV[1], ARGV[2]\n"


def _probe(body: str, lib: str = "") -> Analysis:
    sources = lua_sources()
    sources["probe.lua"] = PROBE + PROBE_BODY + body
    sources["_lib.lua"] += lib
    return Analysis(sources)


def test_the_checker_passes_a_probe_that_builds_declared_keys() -> None:
    found = _probe(
        "redis.call('RPUSH', root .. 'ring', g)\n"
        "redis.call('ZCARD', lane_of(root, g))\n"
        "local row = root .. 'job:' .. ARGV[3]\n"
        "redis.call('HGET', row, 'state')\n"
        "for _, s in ipairs({'paused', 'lanes'}) do redis.call('SCARD', root .. s) end\n"
    )
    assert [text for _, text in found.problems if text.startswith("probe.lua")] == []


@pytest.mark.parametrize(
    ("body", "lib", "kind", "fragment"),
    [
        ("redis.call('DEL', root .. 'newthing')\n", "", "key", "emq:{<q>}:newthing"),
        ("redis.call('GET', root .. 'g:' .. g .. ':sidecar')\n", "", "key", ":sidecar"),
        (
            "redis.call('GET', sidecar(root, g))\n",
            "local function sidecar(root, g)\n  return root .. 'x:' .. g\nend\n",
            "key",
            "emq:{<q>}:x:<g>",
        ),
        (
            "for _, s in ipairs({'ring', 'nope'}) do redis.call('DEL', root .. s) end\n",
            "",
            "key",
            "emq:{<q>}:nope",
        ),
        (
            "if field ~= 'glimit' and field ~= 'gnew' then return end\n"
            "redis.call('HSET', root .. field, g, 1)\n",
            "",
            "key",
            "emq:{<q>}:gnew",
        ),
        ("redis.call('GET', string.format('%sjob', root))\n", "", "escape", "`root`"),
        ("local other = 'x' .. root\n", "", "escape", "`root`"),
        ("redis.call('GET', KEYS[2])\n", "", "KEYS", "KEYS[2]"),
        ("redis.call('GET', 'emq:{orders}:ring')\n", "", "key", "literal key"),
        ("redis.call('GET', ARGV[3])\n", "", "key", "no KEYS leads to"),
        ("redis.call('DEL', root .. 'ring', ARGV[3])\n", "", "key", "no KEYS leads to"),
        (
            "redis.call('ZRANGESTORE', root .. 'dead', root .. 'active', 0, 1)\n",
            "",
            "command",
            "ZRANGESTORE",
        ),
        ("redis.call('SPUBLISH', root .. 'chan', g)\n", "", "key", "emq:{<q>}:chan"),
        ("redis.call('PUBSUB', 'SHARDNUMSUB', root .. 'chan')\n", "", "key", "emq:{<q>}:chan"),
        ("redis.call('SADD', root .. 'ring', g)\n", "", "type", "SADD (SET) on emq:{<q>}:ring"),
        ("local ring = root .. 'ring'\nredis.call('HGET', ring, g)\n", "", "type", "HGET"),
    ],
)
def test_the_checker_flags_what_the_layout_does_not_declare(
    body: str, lib: str, kind: str, fragment: str
) -> None:
    problems = _probe(body, lib).problems_of(kind)
    assert any(fragment in p for p in problems), problems


# --- Python against LAYOUT ----------------------------------------------------------------------


def _build(source: str) -> str:
    """The key a shape's ``source`` (``Keyspace.<member>`` or a module-level name) builds."""
    owner: object
    if source.startswith("Keyspace."):
        owner, name = Keyspace(SAMPLES["q"]), source.removeprefix("Keyspace.")
    else:
        module, _, name = source.rpartition(".")
        owner = importlib.import_module(module or "echomq.engine.keys")
    built: Callable[..., str] | str = getattr(owner, name)
    if isinstance(built, str):
        return built
    params = inspect.signature(built).parameters
    return built(**{name: SAMPLES[name] for name in params})


def _shapes_matching(key: str) -> list[str]:
    def regex(pattern: str) -> str:
        parts = re.split(r"<\w+>", pattern)
        return "[^{}]+".join(re.escape(part) for part in parts)

    return [s.pattern for s in LAYOUT if re.fullmatch(regex(s.pattern), key)]


def test_the_layout_is_well_formed() -> None:
    assert len(SHAPES) == len(LAYOUT)
    assert len({shape.source for shape in LAYOUT}) == len(LAYOUT)
    for shape in LAYOUT:
        assert len(set(shape.placeholders)) == len(shape.placeholders), shape.pattern
        assert shape.meaning, shape.pattern
        tag = re.search(r"\{([^}]*)\}", shape.pattern)
        assert tag, f"{shape.pattern} has no hash tag"
        assert tag.group(1), f"{shape.pattern} has an empty hash tag"
        if shape.source.startswith("Keyspace."):
            assert shape.pattern.startswith(QUEUE_ROOT), shape.pattern


@pytest.mark.parametrize("shape", LAYOUT, ids=lambda shape: shape.pattern)
def test_every_shape_is_built_by_its_source(shape: _keys.KeyShape) -> None:
    assert _build(shape.source) == shape.fill(**SAMPLES)
    assert _shapes_matching(shape.fill(**SAMPLES)) == [shape.pattern]


def _keyspace_members() -> list[str]:
    attributes = [f.name for f in dataclasses.fields(Keyspace) if f.name not in ("queue", "tag")]
    methods = [
        name
        for name, value in vars(Keyspace).items()
        if inspect.isfunction(value) and not name.startswith("_") and name not in NOT_KEYS
    ]
    return attributes + methods


@pytest.mark.parametrize("member", _keyspace_members())
def test_every_keyspace_member_builds_exactly_one_shape(member: str) -> None:
    key = _build(f"Keyspace.{member}")
    matched = _shapes_matching(key)
    assert len(matched) == 1, (key, matched)
    assert SHAPES[matched[0]].source == f"Keyspace.{member}"


def test_all_fixed_is_every_fixed_queue_shape_in_layout_order() -> None:
    fixed = [
        shape.fill(**SAMPLES)
        for shape in LAYOUT
        if shape.source.startswith("Keyspace.")
        and shape.placeholders == ("q",)
        and shape.pattern != QUEUE_ROOT
    ]
    assert Keyspace(SAMPLES["q"]).all_fixed() == tuple(fixed)


# --- docs against LAYOUT ------------------------------------------------------------------------


def _doc_form(pattern: str) -> str:
    return re.sub(r"\{<(\w+)>\}", r"{\1}", pattern)


def _reference_table() -> dict[str, str]:
    """The keyspace table of docs/reference/keyspace.md: each key (doc form) and its type cell."""
    text = REFERENCE.read_text("utf-8")
    section = text.split("## Keyspace of queue", 1)[1].split("\n## ", 1)[0]
    root = _doc_form(QUEUE_ROOT)
    rows: dict[str, str] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        for span in re.findall(r"`([^`]+)`", cells[0]):
            rows[span if span.startswith(root) else root + span] = cells[1]
    return rows


def test_the_reference_keyspace_table_lists_every_queue_shape_with_its_type() -> None:
    table = _reference_table()
    queue = {_doc_form(s.pattern): s for s in LAYOUT if s.pattern.startswith(QUEUE_ROOT)}
    assert set(table) == set(queue)
    for key, typ in table.items():
        assert typ == queue[key].type, key


def test_the_reference_names_every_deployment_wide_shape() -> None:
    spans = set(re.findall(r"`([^`\n]+)`", REFERENCE.read_text("utf-8")))
    for shape in LAYOUT:
        if not shape.pattern.startswith(QUEUE_ROOT):
            assert _doc_form(shape.pattern) in spans, shape.pattern

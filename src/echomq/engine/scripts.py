"""The script registry: every ``.lua`` file under ``echomq/engine/lua`` is one engine transition.

Scripts are called ``EVALSHA``-first. On ``NOSCRIPT`` (after a restart or ``SCRIPT FLUSH``, also
inside a pipeline) the source is loaded with ``SCRIPT LOAD``, the returned sha is checked against
the one computed from the source, and the call is retried once.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

from echomq.errors import EchoMQError, ScriptLoadError, ServerError
from echomq.wire.connector import Arg, Command
from echomq.wire.pool import Wire, call_durable
from echomq.wire.script import Script as Script  # the value the wire sends; named here too

_HELPER = re.compile(r"^local function (\w+)\(.*?^end\n", re.M | re.S)


def _helpers(library: str) -> dict[str, str]:
    """The library's top-level ``local function`` blocks by name, each with its comment."""
    found: dict[str, str] = {}
    start = 0
    for match in _HELPER.finditer(library):
        found[match.group(1)] = library[start : match.end()].lstrip("\n")
        start = match.end()
    return found


def _link(helpers: dict[str, str], body: str) -> str:
    """Prepend the helpers ``body`` uses (and theirs), each after the helpers it calls.

    Only what a script calls is defined: Lua builds every ``local function`` anew on each call,
    so an unused helper would cost every call a closure and some garbage. A ``local function``
    sees only the locals defined above it, so the order is the calls' order, not the files':
    a library file may build on any other.
    """
    emitted: dict[str, None] = {}  # an ordered set
    visiting: set[str] = set()

    def visit(text: str, own: str | None) -> None:
        for name, block in helpers.items():
            if name == own or name in emitted or not re.search(rf"\b{name}\(", text):
                continue
            if name in visiting:
                raise ValueError(f"Lua helpers call each other in a circle through {name}")
            visiting.add(name)
            visit(block, name)
            visiting.discard(name)
            emitted[name] = None

    visit(body, None)
    return "".join(helpers[name] for name in emitted) + body


@functools.cache
def _package_scripts(package: str, folder: str) -> tuple[Script, ...]:
    entries = sorted(
        (e for e in resources.files(package).joinpath(folder).iterdir() if e.name.endswith(".lua")),
        key=lambda e: e.name,
    )
    helpers = _helpers("".join(e.read_text("utf-8") for e in entries if e.name.startswith("_")))
    return tuple(
        Script.from_source(e.name.removesuffix(".lua"), _link(helpers, e.read_text("utf-8")))
        for e in entries
        if not e.name.startswith("_")
    )


#: Commands per pipelined chunk of a long batch (see ``run_many``).
PIPELINE_CHUNK = 128


def _is_noscript(reply: Any) -> bool:
    return isinstance(reply, ServerError) and reply.code == "NOSCRIPT"


class ScriptRegistry:
    """Named scripts and the EVALSHA-first calling convention."""

    def __init__(self, scripts: Iterable[Script]) -> None:
        self.scripts: Mapping[str, Script] = {script.name: script for script in scripts}
        self.loads = 0

    @classmethod
    def from_package(cls, package: str = "echomq.engine", folder: str = "lua") -> ScriptRegistry:
        """Every ``*.lua`` transition of the package; ``_*.lua`` libraries are prepended to each.
        The files are read and linked once per process (the scripts are immutable values)."""
        return cls(_package_scripts(package, folder))

    def __getitem__(self, name: str) -> Script:
        """The script of that file stem; a typed layer looks each one up once, at its start."""
        return self.scripts[name]

    async def load(self, wire: Wire, script: Script) -> None:
        got = await wire.call("SCRIPT", "LOAD", script.source)
        got = got.decode() if isinstance(got, bytes) else str(got)
        self.loads += 1
        if got != script.sha:
            raise ScriptLoadError(script.name, script.sha, got)

    async def run(
        self, wire: Wire, script: Script, keys: Sequence[Arg], args: Sequence[Arg] = ()
    ) -> Any:
        """Run one script; its error reply is raised (typed for ``EMQ*`` refusals)."""
        command = script.command(keys, args)
        try:
            return await wire.call(*command)
        except ServerError as exc:
            if exc.code != "NOSCRIPT":
                raise
        await self.load(wire, script)
        return await wire.call(*command)

    async def run_many(
        self,
        wire: Wire,
        calls: Sequence[tuple[Script, Sequence[Arg], Sequence[Arg]]],
        per_pipeline: int = PIPELINE_CHUNK,
    ) -> list[Any]:
        """Run many scripts pipelined; every reply comes back in place, in order: a value, an
        error reply (typed for ``EMQ*``), or the exception of the chunk that carried it.

        A long batch goes out in chunks issued back to back, so the server starts on the first
        chunk while the client still encodes the next (the connector writes a full buffer at
        once instead of at the end of the tick). Every chunk is awaited, whatever happens to
        the others: a chunk lost with its connection (:class:`Disconnected`) stands in place for
        each of its calls, and the answers of the chunks that were answered are kept.
        ``per_pipeline`` is the chunk's length in calls: 1 for calls that each carry a batch.
        """
        commands = [script.command(keys, args) for script, keys, args in calls]
        spans = range(0, len(commands), per_pipeline)
        outcomes = await asyncio.gather(
            *(_send(wire, commands[start : start + per_pipeline]) for start in spans),
            return_exceptions=True,
        )
        replies: list[Any] = []
        for start, outcome in zip(spans, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome  # cancelled: nothing to report in place
                replies += [outcome] * len(commands[start : start + per_pipeline])
            else:
                replies += outcome
        await self._resend_noscript(wire, calls, commands, replies, wire.call_many)
        return replies

    async def _resend_noscript(
        self,
        wire: Wire,
        calls: Sequence[tuple[Script, Sequence[Arg], Sequence[Arg]]],
        commands: Sequence[Command],
        replies: list[Any],
        send: Callable[[list[Command]], Awaitable[list[Any]]],
    ) -> list[Any] | EchoMQError | None:
        """Load the scripts a ``NOSCRIPT`` answered, send their calls again with ``send`` and
        put the new replies in place in ``replies``; what ``send`` answered beyond them (a
        durable pipeline's wait), the error that failed the resend, or None when none was
        needed."""
        missing = [i for i, reply in enumerate(replies) if _is_noscript(reply)]
        if not missing:
            return None
        try:
            for script in {calls[i][0] for i in missing}:
                await self.load(wire, script)
            again = await send([commands[i] for i in missing])
        except EchoMQError as exc:
            for i in missing:
                replies[i] = exc
            return exc
        for i, reply in zip(missing, again[: len(missing)], strict=True):
            replies[i] = reply
        return again[len(missing) :]

    async def run_durable(
        self,
        wire: Wire,
        calls: Sequence[tuple[Script, Sequence[Arg], Sequence[Arg]]],
        wait: Command,
    ) -> tuple[list[Any], list[Any]]:
        """Run scripts in ONE pipeline followed by ``wait`` (a ``WAITAOF``) on the same
        connection, so the wait covers every write before it: one wait for the whole batch (and
        for every other batch of the same flush), in the same round trip or, when it counts
        replicas, once the replies are in (see :meth:`Connector.call_durable`). Returns each
        call's reply in place (as :meth:`run_many`) and the wait's replies, one per pipeline
        sent (a ``NOSCRIPT`` resend carries its own wait, as it may go out on another
        connection of a pool).

        A lost connection fails the whole pipeline: every call and the wait hold the error.
        """
        commands = [script.command(keys, args) for script, keys, args in calls]
        try:
            answers = await call_durable(wire, commands, wait)
        except EchoMQError as exc:
            return [exc] * len(commands), [exc]
        replies, waits = answers[:-1], answers[-1:]
        resent = await self._resend_noscript(
            wire, calls, commands, replies, lambda again: call_durable(wire, again, wait)
        )
        if isinstance(resent, EchoMQError):
            waits.append(resent)
        elif resent is not None:
            waits += resent  # the resend's own wait
        return replies, waits


def _send(wire: Wire, commands: Sequence[Command]) -> Awaitable[list[Any]]:
    """``wire.call_many``, with a refusal raised at once (closed, overloaded) turned into a
    failed future, so the chunks already sent are still awaited and answered in place."""
    try:
        return wire.call_many(commands)
    except EchoMQError as exc:
        failed: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        failed.set_exception(exc)
        return failed

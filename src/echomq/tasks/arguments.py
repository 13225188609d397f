"""A task's arguments and result on the wire: bound with the function's signature at enqueue
(a wrong argument is refused before any write), carried as plain JSON values, and rebuilt from
the annotations on the other side (pydantic models, msgspec structs, dataclasses). Never pickle.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from echomq.errors import InvalidArgument, shown
from echomq.wire.codec import MAX_DEPTH

Convert = Callable[[Any], Any]
#: Levels of a job's payload above its arguments: the payload object and its ``args``.
ENVELOPE = 2
#: The positional arguments of a call made by name alone (one shared value, not one per job).
_BY_NAME: tuple[Any, ...] = ()
#: Types JSON carries as they are (exact types: a subclass, say an IntEnum, goes through dump).
_PLAIN = frozenset({str, int, float, bool, type(None)})


def dump(value: Any, depth: int = 1, argument: str = "args") -> Any:
    """``value`` as JSON-shaped builtins: models, structs and dataclasses become dicts.

    A list, dict or dataclass nested deeper than the codec's :data:`MAX_DEPTH` is refused
    (``InvalidArgument`` naming ``argument``) before it is walked further: the walk is recursive,
    but never more than that many levels, so a deep argument is refused, never a
    ``RecursionError`` (and a self-referencing one too)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if depth > MAX_DEPTH and isinstance(value, list | tuple | dict):
        raise InvalidArgument(argument, shown(value, 80), f"nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, list | tuple):
        return [dump(item, depth + 1, argument) for item in value]
    if isinstance(value, dict):
        return {key: dump(item, depth + 1, argument) for key, item in value.items()}
    if isinstance(value, type):
        return value  # a class is no value: the codec refuses it, naming it
    if callable(getattr(value, "model_dump", None)):  # pydantic v2, without importing it
        return value.model_dump(mode="json")
    msgspec = sys.modules.get("msgspec")
    if msgspec is not None and isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    if dataclasses.is_dataclass(value):
        if depth > MAX_DEPTH:
            raise InvalidArgument(argument, type(value).__name__, f"nests deeper than {MAX_DEPTH}")
        fields = dataclasses.fields(value)
        return {f.name: dump(getattr(value, f.name), depth + 1, argument) for f in fields}
    return value  # the codec refuses what JSON cannot carry, before any write


def converter(hint: Any) -> Convert | None:
    """How to rebuild a value annotated ``hint`` from its JSON form; None: as JSON gives it."""
    if isinstance(hint, type):
        validate = getattr(hint, "model_validate", None)
        if callable(validate):
            return validate  # type: ignore[no-any-return]
        msgspec = sys.modules.get("msgspec")
        if msgspec is not None and issubclass(hint, msgspec.Struct):
            return lambda value: msgspec.convert(value, hint)
        if dataclasses.is_dataclass(hint):
            return _dataclass(hint)
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (list, tuple, set, frozenset) and args:
        kind = typing.cast(type, origin)
        each = converter(args[0])
        if each is not None:
            return lambda value: kind([each(item) for item in value])
        return None if kind is list else kind  # JSON carries every sequence as a list
    if origin is dict and len(args) == 2:
        inner = converter(args[1])
        if inner is not None:
            return lambda value: {key: inner(item) for key, item in value.items()}
        return None
    if origin in (typing.Union, types.UnionType):
        options = [converter(arg) for arg in args if arg is not type(None)]
        if len(options) == 1 and options[0] is not None:
            one = options[0]
            return lambda value: None if value is None else one(value)
    return None


def _dataclass(cls: type) -> Convert:
    hints = _hints(cls)
    fields = {f.name: converter(hints.get(f.name)) for f in dataclasses.fields(cls) if f.init}

    def build(value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        return cls(**{k: v if fields.get(k) is None else fields[k](v) for k, v in value.items()})  # type: ignore[misc]

    return build


def _hints(obj: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(obj)
    except Exception:  # an annotation that cannot be resolved: its value travels as JSON gives it
        return {}


def _classes(hint: Any) -> tuple[type, ...] | None:
    """The classes a value annotated ``hint`` must be an instance of, when that is plain."""
    if hint is float:
        return (float, int)
    if hint is Any:
        return None  # a class since Python 3.11, but no class of values
    if isinstance(hint, type) and not typing.get_args(hint):
        try:
            isinstance(None, hint)  # a Protocol that is not runtime_checkable cannot check
        except TypeError:
            return None
        return (hint,)
    origin = typing.get_origin(hint)
    if origin in (list, dict, tuple, set, frozenset):
        return (origin,) if origin is not list else (list, tuple)
    if origin in (typing.Union, types.UnionType):
        found: list[type] = []
        for arg in typing.get_args(hint):
            classes = _classes(arg)
            if classes is None:
                return None
            found.extend(classes)
        return tuple(found)
    return None


class Signature:
    """One task function's parameters: binds, checks and dumps calls; loads and rebuilds them.

    A signature of plain parameters (no ``*args``, ``**kwargs`` or positional-only ones) binds
    and loads by name without ``inspect``'s general binder, which costs more than the rest of
    an enqueue; anything it cannot place goes to that binder, which says what is wrong.
    """

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.name = name
        self.signature = inspect.signature(fn)
        params = self.signature.parameters.values()
        self._fn = fn
        self._is_plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
        self._positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        self._names = frozenset(p.name for p in params)
        #: The parameters' names: with :attr:`as_given`, a payload's ``args`` naming exactly
        #: these are the function's keyword arguments as they are (what :meth:`load` returns).
        self.names = self._names
        #: Set once the hints are read (:meth:`hints`): plain parameters, none rebuilt from its
        #: annotation, so a complete call needs no :meth:`load` (the worker's one look-up less).
        self.as_given = False
        self._required = frozenset(
            p.name
            for p in params
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        #: Every required parameter can be given by place (no required keyword-only one).
        self._by_place = self._is_plain and self._required <= frozenset(self._positional)
        self._hints: dict[str, Any] | None = None
        self._checks: list[tuple[str, tuple[type, ...]]] = []
        #: The checks by place, for a call of every positional parameter given by place.
        self._placed: list[tuple[int, tuple[type, ...]]] = []
        #: The arity of such a call when it binds by place alone (else -1: never).
        self._arity = len(self._positional) if self._by_place else -1
        self._loads: dict[str, Convert] = {}
        self._result: Convert | None = None

    def hints(self) -> dict[str, Any]:
        # Resolved at first use, not at decoration: annotations may name classes defined later.
        if self._hints is None:
            hints = _hints(self._fn)
            loads = {name: converter(hint) for name, hint in hints.items()}
            self._result = loads.pop("return", None)
            self._loads = {name: load for name, load in loads.items() if load is not None}
            for p in self.signature.parameters.values():
                classes = _classes(hints.get(p.name, Any))
                if classes is not None and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    self._checks.append((p.name, classes))
            places = {name: index for index, name in enumerate(self._positional)}
            self._placed = [(places[n], c) for n, c in self._checks if n in places]
            self.as_given = self._is_plain and not self._loads
            self._hints = hints
        return self._hints

    def bound(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """:meth:`bind`'s arguments, and their :meth:`dump` (the same dict for plain values).

        The commonest call (every positional parameter given by place, each passing its
        check) is placed by position in one pass; any other call, and any argument that fails
        its check, takes :meth:`bind`, which raises what it raises."""
        if not kwargs and len(args) == self._arity:
            if self._hints is None:
                self.hints()
            for index, classes in self._placed:
                if not isinstance(args[index], classes):
                    break  # bind says what is wrong, as it always did
            else:
                arguments = dict(zip(self._positional, args, strict=False))
                if _PLAIN.issuperset(map(type, args)):
                    return arguments, arguments
                return arguments, self.dump(arguments)
        arguments = self.bind(args, kwargs)
        return arguments, self.dump(arguments)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by parameter name (as passed: defaults stay the worker's),
        each value checked against a plain annotation."""
        arguments: dict[str, Any] | None = None
        if not kwargs and self._by_place and len(args) == len(self._positional):
            # The commonest call: every positional parameter given by place, nothing else due.
            arguments = dict(zip(self._positional, args, strict=False))
        elif self._is_plain and len(args) <= len(self._positional):
            arguments = dict(zip(self._positional, args, strict=False))
            if kwargs and (kwargs.keys() - self._names or not arguments.keys().isdisjoint(kwargs)):
                arguments = None
            elif kwargs:
                arguments.update(kwargs)
            if arguments is not None and not self._required <= arguments.keys():
                arguments = None
        if arguments is None:
            try:
                arguments = dict(self.signature.bind(*args, **kwargs).arguments)
            except TypeError as exc:
                raise InvalidArgument(
                    "args", _preview(args, kwargs), f"{self.name}: {exc}"
                ) from None
        if self._hints is None:
            self.hints()
        for name, classes in self._checks:
            if name in arguments and not isinstance(value := arguments[name], classes):
                expected = " | ".join(
                    c.__name__ for c in classes if c is not int or float not in classes
                )
                raise InvalidArgument(
                    "args",
                    value,
                    f"{self.name}: parameter {name!r} expects {expected}, "
                    f"got {type(value).__name__}",
                )
        return arguments

    def bind_receiving(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """The first parameter's name (it receives a flow's result at run time) and the call's
        other arguments, bound and checked as :meth:`bind` does."""
        params = list(self.signature.parameters.values())
        if not params or params[0].kind not in (params[0].POSITIONAL_OR_KEYWORD,):
            raise InvalidArgument(
                "task", self.name, "a receiving task needs a first parameter that takes the result"
            )
        first = params[0].name
        if first in kwargs:
            raise InvalidArgument("args", first, f"{self.name}: {first!r} receives the result")
        rest = self.signature.replace(parameters=params[1:])
        try:
            arguments = dict(rest.bind(*args, **kwargs).arguments)
        except TypeError as exc:
            raise InvalidArgument("args", _preview(args, kwargs), f"{self.name}: {exc}") from None
        if self._hints is None:
            self.hints()
        for name, classes in self._checks:
            if name in arguments and not isinstance(value := arguments[name], classes):
                raise InvalidArgument(
                    "args", value, f"{self.name}: parameter {name!r} got {type(value).__name__}"
                )
        return first, arguments

    def call_with(self, fn: Callable[..., Any], arguments: dict[str, Any]) -> Any:
        """``fn`` (a lane or dedup function) called with the task's arguments, defaults filled."""
        full = {**self.defaults, **arguments}
        if self._is_plain:
            return fn(**full)
        bound = inspect.BoundArguments(self.signature, full)
        return fn(*bound.args, **bound.kwargs)

    def dump(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments as JSON-shaped values (a call of plain values is its own dump)."""
        if _PLAIN.issuperset(map(type, arguments.values())):
            return arguments
        # An argument sits 3 deep in its payload (``{"args": {name: value}}``): the codec's
        # bound, less those two levels, is the argument's own.
        return {name: dump(value, ENVELOPE + 1) for name, value in arguments.items()}

    def load(self, arguments: Any) -> tuple[Sequence[Any], dict[str, Any]]:
        """A payload's ``args`` as the positional and keyword arguments of the function."""
        if type(arguments) is not dict and not isinstance(arguments, dict):
            raise InvalidArgument("args", arguments, f"{self.name}: args must be an object")
        if self._hints is None:
            self.hints()
        loads = self._loads
        if loads:
            arguments = {k: v if k not in loads else self._load(k, v) for k, v in arguments.items()}
        if self._is_plain:
            # No set built per job: the names given are checked against the signature's (all
            # of them given, the commonest call, is one comparison).
            if arguments.keys() != self._names and (
                not self._names.issuperset(arguments) or not self._required <= arguments.keys()
            ):
                # The worker's function changed since the job was enqueued: the binder says how.
                self._bind_loaded(arguments)
            return _BY_NAME, arguments
        return self._bind_loaded(arguments)

    def _load(self, name: str, value: Any) -> Any:
        load = self._loads[name]
        kind = self.signature.parameters[name].kind if name in self._names else None
        if kind is inspect.Parameter.VAR_POSITIONAL:
            return [load(v) for v in value]
        if kind is inspect.Parameter.VAR_KEYWORD:
            return {k: load(v) for k, v in value.items()}
        return value if value is None else load(value)

    def _bind_loaded(self, arguments: dict[str, Any]) -> tuple[Sequence[Any], dict[str, Any]]:
        unknown = arguments.keys() - self._names
        if unknown:
            name = sorted(unknown)[0]
            raise InvalidArgument("args", name, f"{self.name} has no parameter {name!r}")
        bound = inspect.BoundArguments(self.signature, arguments)
        try:
            self.signature.bind(*bound.args, **bound.kwargs)
        except TypeError as exc:
            raise InvalidArgument("args", arguments, f"{self.name}: {exc}") from None
        return list(bound.args), dict(bound.kwargs)

    def result(self, value: Any) -> Any:
        """A stored result rebuilt from the return annotation."""
        self.hints()
        return value if self._result is None or value is None else self._result(value)


def _preview(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [shown(a, 80) for a in args] + [f"{k}={shown(v, 80)}" for k, v in kwargs.items()]
    text = f"({', '.join(parts)})"
    return text if len(text) <= 80 else text[:77] + "..."

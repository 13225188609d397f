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
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import InvalidArgument

Convert = Callable[[Any], Any]


def dump(value: Any) -> Any:
    """``value`` as JSON-shaped builtins: models, structs and dataclasses become dicts."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [dump(item) for item in value]
    if isinstance(value, dict):
        return {key: dump(item) for key, item in value.items()}
    if isinstance(value, type):
        return value  # a class is no value: the codec refuses it, naming it
    if callable(getattr(value, "model_dump", None)):  # pydantic v2, without importing it
        return value.model_dump(mode="json")
    msgspec = sys.modules.get("msgspec")
    if msgspec is not None and isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    if dataclasses.is_dataclass(value):
        return {f.name: dump(getattr(value, f.name)) for f in dataclasses.fields(value)}
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
    if isinstance(hint, type) and not typing.get_args(hint):
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
    """One task function's parameters: binds, checks and dumps calls; loads and rebuilds them."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.name = name
        self.signature = inspect.signature(fn)
        self._fn = fn
        self._hints: dict[str, Any] | None = None
        self._loads: dict[str, Convert | None] = {}
        self._result: Convert | None = None

    def hints(self) -> dict[str, Any]:
        # Resolved at first use, not at decoration: annotations may name classes defined later.
        if self._hints is None:
            self._hints = _hints(self._fn)
            self._loads = {name: converter(hint) for name, hint in self._hints.items()}
            self._result = self._loads.pop("return", None)
        return self._hints

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
        """The call bound to the parameters, each value checked against a plain annotation."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidArgument("args", _preview(args, kwargs), f"{self.name}: {exc}") from None
        hints = self.hints()
        for name, value in bound.arguments.items():
            parameter = self.signature.parameters[name]
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            classes = _classes(hints.get(name, Any))
            if classes is not None and not isinstance(value, classes):
                expected = " | ".join(
                    c.__name__ for c in classes if c is not int or float not in classes
                )
                raise InvalidArgument(
                    "args",
                    value,
                    f"{self.name}: parameter {name!r} expects {expected}, "
                    f"got {type(value).__name__}",
                )
        return bound

    def dump(self, bound: inspect.BoundArguments) -> dict[str, Any]:
        """The arguments as passed (defaults are the worker's), as JSON-shaped values."""
        return {name: dump(value) for name, value in bound.arguments.items()}

    def load(self, arguments: Any) -> tuple[list[Any], dict[str, Any]]:
        """A payload's ``args`` as the positional and keyword arguments of the function."""
        if not isinstance(arguments, dict):
            raise InvalidArgument("args", arguments, f"{self.name}: args must be an object")
        self.hints()
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        parameters = self.signature.parameters
        for name, value in arguments.items():
            parameter = parameters.get(name)
            if parameter is None:
                raise InvalidArgument("args", name, f"{self.name} has no parameter {name!r}")
            load = self._loads.get(name)
            if parameter.kind is parameter.VAR_POSITIONAL:
                positional.extend(value if load is None else [load(v) for v in value])
            elif parameter.kind is parameter.VAR_KEYWORD:
                keywords.update(value if load is None else {k: load(v) for k, v in value.items()})
            elif parameter.kind is parameter.POSITIONAL_ONLY:
                positional.append(value if load is None else load(value))
            else:
                keywords[name] = value if load is None else load(value)
        try:
            bound = self.signature.bind(*positional, **keywords)
        except TypeError as exc:  # the worker's function changed since the job was enqueued
            raise InvalidArgument("args", arguments, f"{self.name}: {exc}") from None
        return list(bound.args), dict(bound.kwargs)

    def result(self, value: Any) -> Any:
        """A stored result rebuilt from the return annotation."""
        self.hints()
        return value if self._result is None or value is None else self._result(value)


def _preview(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    text = f"({', '.join(shown)})"
    return text if len(text) <= 80 else text[:77] + "..."

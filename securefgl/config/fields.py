"""Typed fields of configuration dataclasses: values checked (and converted) against the
field's type hint, unknown keys refused with a suggestion, and the field metadata that the
command line reads (``help``, ``choices``, ``group``, ``flag``, ``unprefixed``)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import numbers
import types
import typing
from collections.abc import Iterable
from typing import Any


class ConfigError(ValueError):
    """An invalid experiment configuration."""


_KINDS = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


def option(
    default: Any, help: str, group: str | None = None, choices: tuple[Any, ...] | None = None,
    **extra: Any,
) -> Any:  # fmt: skip
    """A dataclass field with its command-line metadata (lists and dicts copied per use)."""
    meta = {"help": help, "group": group, "choices": choices, **extra}
    if isinstance(default, list | dict):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known word, or ``""``."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_keys(what: str, given: Iterable[str], known: Iterable[str]) -> None:
    """Refuse keys of ``given`` that are not ``known``, each with its closest known key."""
    known = sorted(known)
    unknown = sorted(set(given) - set(known))
    if unknown:
        hints = "".join(did_you_mean(k, known) for k in unknown)
        raise ConfigError(f"unknown {what} keys {unknown}{hints}; known keys: {known}")


@functools.cache
def hints(kind: type) -> dict[str, Any]:
    return typing.get_type_hints(kind)


def show(value: Any) -> str:
    """``'ten' (a string)``: a value and its kind, for messages."""
    kind = next((k for t, k in _KINDS.items() if type(value) is t), None)
    if kind is None:
        kind = {list: "a list", tuple: "a list", dict: "a table"}.get(type(value))
    return f"{value!r} ({kind or type(value).__name__})"


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [_describe(a) for a in args if a is not type(None)]
        return " or ".join(inner) + (" (or unset)" if type(None) in args else "")
    if origin in (list, tuple):
        return f"a list of {_describe(args[0]).split(' ', 1)[1]}s" if args else "a list"
    if origin is dict or hint is dict:
        return "a table"
    return _KINDS.get(hint, getattr(hint, "__name__", str(hint)))


def checked(name: str, value: Any, hint: Any) -> Any:
    """``value`` if it has type ``hint`` (ints accepted for floats, tuples for lists, both
    converted), else a :class:`ConfigError` naming the field, the expected and the given."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in (a for a in args if a is not type(None)):
            try:
                return checked(name, value, arg)
            except ConfigError:
                continue
    elif hint is bool and isinstance(value, bool):
        return value
    elif hint is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    elif hint is float and isinstance(value, numbers.Real) and not isinstance(value, bool):
        if value == value:  # NaN is no setting
            return float(value)
    elif hint is str and isinstance(value, str):
        return value
    elif origin in (list, tuple) and isinstance(value, list | tuple):
        elem = args[0] if args else Any
        items = [checked(f"{name}[{i}]", v, elem) for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    elif (origin is dict or hint is dict) and isinstance(value, dict):
        return value
    elif origin is None and inspect.isclass(hint) and hint not in _KINDS:
        if isinstance(value, hint):
            return value
        raise ConfigError(f"{name} must be a {hint.__name__}, got {show(value)}")
    note = ' (e.g. ["secagg"])' if name.endswith("stack") else ""
    note += " (not NaN)" if isinstance(value, float) and value != value else ""
    raise ConfigError(f"{name} must be {_describe(hint)}{note}, got {show(value)}")


def settings_from_dict(name: str, kind: type, values: dict[str, Any]) -> Any:
    """A ``kind`` settings object from a table: keys checked, types converted, the class's
    own checks run; any problem is a :class:`ConfigError` naming the table ``[name]``."""
    unknown_keys(f"[{name}]", values, [f.name for f in public_fields(kind)])
    kinds = hints(kind)
    values = {k: checked(f"{name}.{k}", v, kinds[k]) for k, v in values.items()}
    try:
        return kind(**values)
    except (TypeError, ValueError) as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(f"{name}: {err}") from None


def public_fields(kind: type) -> list[dataclasses.Field]:
    """The fields a user may set (``metadata={"internal": True}`` ones are derived)."""
    return [f for f in dataclasses.fields(kind) if not f.metadata.get("internal")]


def updated(name: str, settings: Any, changes: Any) -> Any:
    """``settings`` with ``changes`` (a table of some of its fields, or a whole settings
    object of the same class)."""
    if isinstance(changes, dict):
        unknown_keys(f"[{name}]", changes, [f.name for f in public_fields(type(settings))])
        kinds = hints(type(settings))
        values = {k: checked(f"{name}.{k}", v, kinds[k]) for k, v in changes.items()}
        try:
            return dataclasses.replace(settings, **values)
        except (TypeError, ValueError) as err:
            if isinstance(err, ConfigError):
                raise
            raise ConfigError(f"{name}: {err}") from None
    if not isinstance(changes, type(settings)):
        raise ConfigError(
            f"{name} must be a table ([experiment.{name}]) of {type(settings).__name__} "
            f"fields, got {show(changes)}"
        )
    return changes

"""Party recipes: how to build a party where it will live, from wire values only.

An executor that keeps parties in other processes (:mod:`securefgl.federation.ray_executor`)
cannot be handed a built party: that would ship the party's state, and the driver would
have held every client's data. A :class:`Recipe` names a *builder* (a module-level
function marked with :func:`party_builder`, written ``"package.module:function"``) and its
wire-serialisable arguments (a client's own view as arrays, the experiment's settings as
JSON, ids and seeds); the process that hosts the party imports the builder and builds it.
The local executor builds recipes the same way, in-process, so both executors run the same
construction code.

Helpers that turn a client's view and the experiment's settings into recipe arguments
are in :mod:`securefgl.federation.builders`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, TypeVar

from securefgl.federation.party import Party, PartyError, check_wire_value

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "_securefgl_party_builder"


class Recipe(NamedTuple):
    """Build a party by calling ``builder`` (``"module:function"``) with ``args``."""

    builder: str
    args: dict[str, Any]


def party_builder(fn: F) -> F:
    """Mark ``fn`` as a builder that recipes may name (nothing else can be called)."""
    setattr(fn, _MARK, True)
    return fn


def recipe(fn: Callable[..., Party], **args: Any) -> Recipe:
    """A recipe for the builder ``fn``; ``args`` must be wire-serialisable."""
    if not getattr(fn, _MARK, False):
        raise TypeError(f"{fn.__qualname__} is not a party builder (@party_builder)")
    check_wire_value(args, f"{fn.__qualname__} recipe")
    return Recipe(f"{fn.__module__}:{fn.__qualname__}", args)


def builder_modules(recipes: Iterable[Recipe]) -> list[str]:
    """The modules that hold the recipes' builders (what a worker imports when it starts)."""
    return sorted({r.builder.partition(":")[0] for r in recipes})


def import_builder_modules(modules: Iterable[str]) -> None:
    """Import ``modules`` ahead of building; one that fails to import is left for
    :func:`build` to report."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def build(r: Recipe) -> Party:
    """Import the recipe's builder and build the party."""
    module_name, _, name = r.builder.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise PartyError(f"no party builder {r.builder!r}: {exc}") from None
    if not getattr(fn, _MARK, False):
        raise PartyError(f"{r.builder} is not a party builder")
    party = fn(**r.args)
    if not isinstance(party, Party):
        raise PartyError(f"{r.builder} built a {type(party).__name__}, not a Party")
    return party

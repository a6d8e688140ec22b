"""Algorithm families as the configuration and the command line see them.

A family (one folder under ``securefgl/algorithms/`` with its code, settings and a
``README.md`` page, or a third-party package) declares a :class:`Family`: its algorithm
names, a loader of their classes (imported only when a run needs them), its settings
dataclass with the section name, flag-group title and flag prefix under which it appears
(``[experiment.<section>]``, ``--<prefix><field>``), and any presets (``--preset``).
Families are found through the ``securefgl.algorithms`` entry-point group
(``name = "package.module:FAMILY"`` in a ``pyproject.toml``), the way pytest and Flower find
their plug-ins: securefgl's own families are listed there too, so the configuration and the
command line never name an algorithm.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from securefgl.config.fields import ConfigError, did_you_mean

ENTRY_POINTS = "securefgl.algorithms"
TASKS = ("node", "graph", "recommendation")


@dataclass(frozen=True)
class Section:
    """A settings dataclass under ``[experiment.<name>]`` and in a flag group."""

    name: str
    settings: type
    title: str
    prefix: str = ""  # flags are --<prefix><field> (fields marked "unprefixed" get both)
    task_wide: bool = False  # read by every algorithm of the family's task (its toolkit)


@dataclass(frozen=True)
class Preset:
    """A flag (``--<flag>``) that rewrites a configuration before the other flags apply,
    e.g. a paper's hyper-parameters for the dataset: ``apply(config, dataset)``."""

    flag: str
    help: str
    apply: Callable[[Any, str], Any]


@dataclass(frozen=True)
class Family:
    """One algorithm family: what the configuration, the command line and the registry
    need to know about it, without importing its code."""

    name: str
    algorithms: tuple[str, ...]  # the names of its algorithms (each class's ``name``)
    load: Callable[[], Sequence[type]]  # its algorithm classes (imported on first use)
    task: str = "node"
    section: Section | None = None
    presets: tuple[Preset, ...] = ()
    defaults: tuple[str, ...] = ()  # algorithms that run when none are named for the task
    #: generic settings whose default differs for this family's task (e.g. its lr)
    task_defaults: Mapping[str, Any] = field(default_factory=dict)
    #: the task's runner when its runs are not rounds of an Algorithm (recommendation)
    run: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"family {self.name!r}: task must be one of {TASKS}")
        if not set(self.defaults) <= set(self.algorithms):
            raise ValueError(f"family {self.name!r}: defaults must be among its algorithms")


@functools.cache
def families() -> Mapping[str, Family]:
    """Every installed family, by name (entry points of :data:`ENTRY_POINTS`)."""
    found: dict[str, Family] = {}
    for ep in sorted(entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        family = ep.load()
        if not isinstance(family, Family):
            raise ConfigError(f"entry point {ep.name} = {ep.value} is not a securefgl Family")
        if family.name in found:
            raise ConfigError(f"two algorithm families are named {family.name!r}")
        found[family.name] = family
    if not found:
        raise ConfigError(
            f"no algorithm family is installed (entry points {ENTRY_POINTS!r}): install the "
            "package (`pip install -e .`, or `make install`)"
        )
    return found


@functools.cache
def sections() -> Mapping[str, Section]:
    """Every family's settings section, by section name (several families may share one)."""
    out: dict[str, Section] = {}
    for family in families().values():
        section = family.section
        if section is None:
            continue
        known = out.get(section.name)
        if known is not None and known.settings is not section.settings:
            raise ConfigError(f"two settings classes claim section [{section.name}]")
        out[section.name] = section
    return out


def task_sections(task: str) -> list[Section]:
    """The settings sections of the families of ``task``."""
    found = {f.section.name: f.section for f in families().values()
             if f.task == task and f.section is not None}  # fmt: skip
    return list(found.values())


def algorithm_names(task: str) -> list[str]:
    """The algorithm names of ``task``, in family order."""
    return [a for f in families().values() if f.task == task for a in f.algorithms]


def default_algorithms(task: str) -> list[str]:
    """What runs when no algorithm is named for ``task``."""
    return [a for f in families().values() if f.task == task for a in f.defaults]


def task_defaults(task: str) -> dict[str, Any]:
    """The generic settings whose default the families of ``task`` change."""
    out: dict[str, Any] = {}
    for family in families().values():
        if family.task == task:
            for key, value in family.task_defaults.items():
                if key in out and out[key] != value:
                    raise ConfigError(f"families of task {task!r} disagree on {key}'s default")
                out[key] = value
    return out


def task_runner(task: str) -> Callable[..., Any] | None:
    """The runner of ``task`` when a family provides one."""
    return next((f.run for f in families().values() if f.task == task and f.run), None)


def family_of(name: str, task: str) -> Family | None:
    """The family that declares algorithm ``name`` for ``task``."""
    return next((f for f in families().values() if f.task == task and name in f.algorithms),
                None)  # fmt: skip


def check_algorithm(name: str, task: str) -> Family:
    """The family of algorithm ``name`` for ``task``, or a :class:`ConfigError` saying which
    task it belongs to (``gpfl`` without ``--task graph``) or the closest name."""
    family = family_of(name, task)
    if family is not None:
        return family
    names = algorithm_names(task)
    others = [t for t in TASKS if t != task and name in algorithm_names(t)]
    hint = did_you_mean(name, names)
    if others:
        how = {"recommendation": "`securefgl recommend`", "node": "--task node",
               "graph": "--task graph"}[others[0]]  # fmt: skip
        if task == "recommendation":  # securefgl recommend has no --task
            how = f"`securefgl run {how}`".replace(" --task node", "")
        hint = f" (it is a {others[0]}-task algorithm: {how})"
    raise ConfigError(f"unknown algorithm {name!r} for task {task!r}{hint}; choose from {names}")

"""Every algorithm by name and task, from the installed families
(:mod:`securefgl.config.families`); a family's classes are imported on first use.

Each algorithm class declares what it needs (``federated``, ``needs_cross_edges``,
``needs_global_graph``); :func:`check_config` checks a configuration against them.
"""

from __future__ import annotations

import functools

from securefgl import extras
from securefgl.algorithms.base import Algorithm
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.config.families import algorithm_names, check_algorithm, families


@functools.cache
def _classes(family: str) -> dict[str, type[Algorithm]]:
    fam = families()[family]
    loaded = {cls.name: cls for cls in fam.load()}
    if sorted(loaded) != sorted(fam.algorithms):
        raise ConfigError(
            f"family {family!r} declares {sorted(fam.algorithms)} but loads {sorted(loaded)}"
        )
    for cls in loaded.values():
        runs_rounds = fam.run is None  # its classes are Algorithms the experiment runs
        if getattr(cls, "task", None) != fam.task or (
            runs_rounds and not (isinstance(cls, type) and issubclass(cls, Algorithm))
        ):
            raise ConfigError(f"family {family!r}: {cls!r} is not a {fam.task}-task algorithm")
    return loaded


def algorithm_class(name: str, task: str = "node") -> type[Algorithm]:
    """The class of algorithm ``name`` for ``task`` (imports its family)."""
    return _classes(check_algorithm(name, task).name)[name]


def algorithms(task: str = "node") -> dict[str, type[Algorithm]]:
    """Every algorithm of ``task`` by name (imports every family of the task)."""
    return {name: algorithm_class(name, task) for name in algorithm_names(task)}


def cross_edge_mode(config: ExperimentConfig) -> str:
    """``config.cross_edges``, or when unset: ``known`` iff an algorithm needs it."""
    if config.cross_edges is not None:
        return config.cross_edges
    if config.task == "graph":
        return "hidden"  # whole graphs per client: no cross-client edges
    needs = any(algorithm_class(a).needs_cross_edges for a in config.algorithms)
    return "known" if needs else "hidden"


def check_config(config: ExperimentConfig) -> ExperimentConfig:
    """The algorithms exist and their needs are met, the executor's optional extra included
    (raises :class:`ConfigError`)."""
    if config.executor == "ray":  # before any data is loaded
        extras.check("ray", "--executor ray")
    config.refuse_unread_protocol_settings()
    for name in config.algorithms:
        cls = algorithm_class(name, config.task)
        cls.check_stack(config)
        if cls.needs_cross_edges and cross_edge_mode(config) != "known":
            raise ConfigError(
                f"{name} needs cross_edges = 'known' (its clients know their edges to other "
                "clients' nodes)"
            )
        if cls.repairs_cross_edges and config.cross_edges == "known":
            raise ConfigError(
                f"{name} generates what its clients miss across clients (it assumes they do "
                "not know their cross-client edges): cross_edges = 'known' contradicts it; "
                "leave cross_edges unset or 'hidden'"
            )
    return config

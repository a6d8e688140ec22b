"""Every algorithm by name and task, from the installed families
(:mod:`securefgl.config.families`); a family's classes are imported on first use.

Each algorithm class declares what it needs (``federated``, ``needs_cross_edges``,
``needs_global_graph``); :func:`check_config` checks a configuration against them.
"""

from __future__ import annotations

import dataclasses
import functools
import logging

from securefgl import extras
from securefgl.algorithms.base import Algorithm
from securefgl.config import ConfigError, ExperimentConfig
from securefgl.config.families import algorithm_names, check_algorithm, families
from securefgl.data.catalog import names_csbm
from securefgl.federation.ray_executor import check_ray_address

log = logging.getLogger(__name__)


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


def unread_sections(config: ExperimentConfig) -> dict[str, list[str]]:
    """The settings sections set away from their defaults that no chosen algorithm reads,
    each with the algorithms that would (a section is its family's, or its task's toolkit)."""
    out = {}
    for family in families().values():
        section = family.section
        if section is None or section.name in out:
            continue
        readers = [f for f in families().values() if f.section is not None
                   and f.section.name == section.name]  # fmt: skip
        if section.task_wide:
            readers = [f for f in families().values() if f.task == family.task]
        names = [a for f in readers if f.task == config.task for a in f.algorithms]
        if set(names) & set(config.algorithms):
            continue
        if config.sections.get(section.name) != section.settings():
            out[section.name] = names or [f"the {family.task} task's algorithms"]
    return out


def unread_section_fields(config: ExperimentConfig) -> dict[str, tuple[str, ...]]:
    """The fields of read sections that only some algorithms read (their metadata's
    ``readers``), set away from their defaults when none of those algorithms is chosen."""
    out = {}
    unread = unread_sections(config)
    for name, settings in config.sections.items():
        if name in unread or not dataclasses.is_dataclass(settings):
            continue
        default = type(settings)()
        for f in dataclasses.fields(settings):
            readers = f.metadata.get("readers", ())
            if (readers and not set(readers) & set(config.algorithms)
                    and getattr(settings, f.name) != getattr(default, f.name)):  # fmt: skip
                out[f"[experiment.{name}] {f.name}"] = tuple(readers)
    return out


def unread_generator_options(config: ExperimentConfig) -> list[tuple[str, str]]:
    """(options, the datasets that read them) for each generator's options set while the
    dataset is another one (``--csbm`` on Cora, ``--graph-motif`` on MUTAG)."""
    name = config.dataset.lower().replace("_", "-")
    if config.task == "node":
        if names_csbm(config.dataset) or config.is_default("csbm"):
            return []
        return [("csbm", "the CSBM generator")]
    if config.task != "graph":
        return []
    graph = config.graph
    out = []
    if graph.motif and not name.startswith("motif"):
        out.append(("[experiment.graph] motif", "GOOD-Motif (motif-basis, motif-size)"))
    if graph.synthetic and name != "synthetic-graphs":
        out.append(("[experiment.graph] synthetic", "synthetic-graphs"))
    return out


def warn_unread_sections(config: ExperimentConfig) -> None:
    """Log a warning for each section no chosen algorithm reads (:func:`unread_sections`)
    and each section field only unchosen algorithms read (:func:`unread_section_fields`)."""
    for name, readers in unread_sections(config).items():
        log.warning("[experiment.%s] is set but only %s read it: it has no effect here",
                    name, ", ".join(readers))  # fmt: skip
    for key, field_readers in unread_section_fields(config).items():
        log.warning("%s is set but only %s read it: it has no effect here", key,
                    ", ".join(field_readers))  # fmt: skip


def warn_unread_fields(config: ExperimentConfig) -> None:
    """Log a warning for each generic field set away from its default that a chosen
    algorithm does not read (its ``instead_of``)."""
    for name in config.algorithms:
        cls = algorithm_class(name, config.task)
        for key, instead in cls.instead_of.items():
            if not config.is_default(key):
                log.warning("%s does not read %s: %s", name, key, instead)
    servers = ("edge_servers", "server_topology")
    if not all(config.is_default(k) for k in servers) and not any(
        algorithm_class(name, config.task).multi_server for name in config.algorithms
    ):
        readers = [name for name, cls in algorithms(config.task).items() if cls.multi_server]
        log.warning("edge_servers and server_topology have no effect here: only %s run "
                    "several edge servers", ", ".join(readers))  # fmt: skip
    for options, dataset_kind in unread_generator_options(config):
        log.warning("%s has no effect: %s is not %s", options, config.dataset, dataset_kind)
    ray_only = [k for k in ("workers", "ray_address", "party_timeout", "ray_co_host")
                if not config.is_default(k)]  # fmt: skip
    if config.executor != "ray" and ray_only:
        log.warning("%s have no effect without --executor ray", ", ".join(ray_only))
    references = [n for n in config.algorithms
                  if algorithm_class(n, config.task).setting != "federated"]
    if config.secure_evaluation and references:
        log.warning("secure_evaluation does not apply to %s: no server evaluates them (the "
                    "experimenter reads their predictions)", ", ".join(references))  # fmt: skip


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
    if config.task == "recommendation":
        raise ConfigError(
            "task 'recommendation' runs with `securefgl recommend` (Python: "
            "securefgl.algorithms.recommendation.runner.run_recommendation)"
        )
    if config.executor == "ray":  # before any data is loaded
        extras.check("ray", "--executor ray")
        check_ray_address(config.ray_address)
    config.refuse_unread_protocol_settings()
    warn_unread_sections(config)
    warn_unread_fields(config)
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

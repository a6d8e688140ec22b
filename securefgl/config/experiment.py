"""Experiment configuration: one dataclass, from Python, a TOML file or CLI flags.

Generic settings are fields of :class:`ExperimentConfig`; the protocol stack's settings are
the ``protocol`` section (:class:`~protocols.settings.ProtocolSettings`); each algorithm
family's settings are a section of its own, found through the installed families
(:mod:`securefgl.config.families`): ``config.section(FedStructSettings)`` in code,
``config.fedstruct`` or ``ExperimentConfig(fedstruct={...})`` from Python, TOML
``[experiment.fedstruct]``. A configuration is validated when it is built: a bad value
raises :class:`ConfigError` naming the field and the allowed values. Each field's
``metadata`` gives its CLI help, choices and group (``securefgl.cli``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import tomllib
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from protocols.settings import ProtocolSettings
from securefgl.config.families import (
    TASKS,
    check_algorithm,
    default_algorithms,
    sections,
    task_defaults,
    task_sections,
)
from securefgl.config.fields import (
    ConfigError,
    checked,
    did_you_mean,
    hints,
    option,
    public_fields,
    settings_from_dict,
    show,
    unknown_keys,
    updated,
)
from securefgl.config.keys import refuse_misplaced, refuse_unknown
from securefgl.config.topology import parse_topology
from securefgl.data.catalog import resolve_graph_name, resolve_name, resolve_rating_name
from securefgl.data.synthetic import check_csbm_options

EXECUTORS = ("local", "ray")
PARTITIONS = ("random", "louvain", "kmeans", "louvain-largest", "louvain-chunks", "metis")
SPLIT_SCOPES = ("global", "client")
CROSS_EDGES = ("hidden", "known")
MODEL_NAMES = ("gcn", "sage", "mlp")
ALL_TASKS = TASKS  # every field applies to these unless its metadata says otherwise
GRAPH_TASKS = ("node", "graph")
NODE_TASK = ("node",)  # the graph task has its own ([experiment.graph]) or none
NON_GRAPH = tuple(t for t in TASKS if t != "graph")

S = TypeVar("S")


def _opt(
    default: Any, help: str, group: str, choices: tuple[Any, ...] | None = None,
    tasks: tuple[str, ...] = GRAPH_TASKS, **extra: Any,
) -> Any:  # fmt: skip
    return option(default, help, group, choices, tasks=tasks, **extra)


@dataclass(init=False)
class ExperimentConfig:
    """One experiment: the generic fields below, the protocol stack (``protocol``) and each
    algorithm family's settings section. Every field is a ``securefgl run`` flag and a TOML
    key (``docs/configuration.md``); the values are checked on construction."""

    # data
    task: str = _opt(
        "node", "node: classify the nodes of one graph; graph: classify whole graphs (each "
        "client holds its own graphs, [experiment.graph]); recommendation: rate items "
        "(`securefgl recommend`)", "data", TASKS, tasks=ALL_TASKS,
    )  # fmt: skip
    dataset: str = _opt(
        "csbm", "dataset name (`securefgl datasets`) or csbm", "data", tasks=ALL_TASKS
    )
    data_root: str | None = _opt(
        None, "data root (default: $SECUREFGL_DATA)", "data", tasks=ALL_TASKS, metavar="DIR"
    )
    download: bool = _opt(
        False, "let PyG download a dataset missing from the data root (off: never)", "data"
    )
    # generator options for "csbm": weak features + homophilous edges, so that structure
    # matters (central ≫ local) and the demo's comparison is informative
    csbm: dict[str, Any] = _opt(
        {"num_nodes": 3000, "feature_signal": 0.2, "homophily": 0.7},
        "generator options as JSON, e.g. '{\"num_nodes\": 5000}'",
        "data", tasks=NODE_TASK,
    )
    normalize_features: bool = _opt(
        False, "divide each node's non-negative features by their sum (at least 1; PyG's "
        "NormalizeFeatures; a per-node step each client can do on its own nodes)", "data",
        tasks=NODE_TASK,
    )  # fmt: skip
    largest_component: bool = _opt(
        False, "keep only the largest connected component (FED-PUB's preprocessing)", "data",
        tasks=NODE_TASK,
    )
    train_fraction: float = _opt(0.1, "training nodes", "data", tasks=NODE_TASK)
    val_fraction: float = _opt(0.1, "validation nodes", "data", tasks=NODE_TASK)
    test_fraction: float = _opt(0.8, "test nodes", "data", tasks=NODE_TASK)
    label_rate: float | None = _opt(
        None, "if set: train = label_rate, test = rest", "data", tasks=NODE_TASK
    )
    split_scope: str = _opt(
        "global", "global: one split of all nodes; client: the fractions drawn inside each "
        "client (FedSage+, FedGLS)", "data", SPLIT_SCOPES, tasks=NODE_TASK,
    )  # fmt: skip
    # federation
    clients: int = _opt(10, "number of clients K", "federation")
    partition: str = _opt("louvain", "how nodes are split into clients", "federation", PARTITIONS,
                          tasks=NODE_TASK)  # fmt: skip
    partition_cut: float | None = _opt(
        None, "raise the edge cut to this fraction by swapping random nodes' clients (sizes "
        "kept): a stress test for a paper's reported missing links", "federation",
        tasks=NODE_TASK,
    )  # fmt: skip
    cross_edges: str | None = _opt(
        None, "what clients know of cross-client edges (default: by algorithm)", "federation",
        CROSS_EDGES, tasks=NODE_TASK,
    )  # fmt: skip
    client_fraction: float = _opt(1.0, "clients sampled per round", "federation")
    client_sampling: str = _opt(
        "fixed",
        "fixed: the server picks client_fraction·K clients (no DP amplification claimed); "
        "poisson: each client joins with probability client_fraction by its own secret coin",
        "federation",
        ("fixed", "poisson"),
    )
    algorithms: list[str] = _opt(
        [], "algorithms to compare (`securefgl run --help` lists them; default: the task's "
        "defaults)", "federation", tasks=ALL_TASKS,
    )  # fmt: skip
    edge_servers: int = _opt(1, "edge servers N (spreadfgl), each covering a block of clients",
                             "federation", tasks=NODE_TASK)  # fmt: skip
    server_topology: str = _opt(
        "ring", "edge-server adjacency: ring, line, complete, star, none or '0-1,1-2'",
        "federation", metavar="SPEC", tasks=NODE_TASK,
    )  # fmt: skip
    # the protocol stack (its own section: transport, DP, secagg, threat model)
    protocol: ProtocolSettings = field(
        default_factory=ProtocolSettings, metadata={"group": "protocol stack", "section": True}
    )
    # model and training
    model: str = _opt("gcn", "backbone of fedavg / fedprox / local / central", "training",
                      MODEL_NAMES, tasks=NODE_TASK)  # fmt: skip
    hidden: int = _opt(64, "hidden width", "training", tasks=NODE_TASK)
    layers: int = _opt(2, "layers", "training", tasks=NODE_TASK)
    dropout: float = _opt(0.5, "dropout", "training", tasks=NODE_TASK)
    lr: float = _opt(0.01, "Adam lr (local, central; the server optimizer's in fedavg)",
                     "training", tasks=NON_GRAPH)  # fmt: skip
    weight_decay: float = _opt(5e-4, "weight decay", "training", tasks=NON_GRAPH)
    rounds: int = _opt(100, "rounds (epochs for local / central; recommendation: the cap "
                       "before validation patience stops a run)", "training",
                       tasks=ALL_TASKS)  # fmt: skip
    local_epochs: int = _opt(1, "local SGD steps per round (fedavg / fedprox)", "training")
    client_lr: float = _opt(1.0, "local SGD lr (1 step at lr 1 = FedSGD)", "training",
                            tasks=NODE_TASK)  # fmt: skip
    server_optimizer: str = _opt("adam", "adam (FedAdam) or sgd (lr 1 = FedAvg)", "training",
                                 ("adam", "sgd"), tasks=NODE_TASK)  # fmt: skip
    mu: float = _opt(0.01, "FedProx proximal weight", "training")
    eval_every: int = _opt(10, "rounds between evaluations", "training", tasks=ALL_TASKS)
    secure_evaluation: bool = _opt(
        False, "the server learns the clients' evaluation only as a SecAgg sum of their counts, "
        "in the run's threat model (off: each client's confusion counts reach it)", "training",
    )  # fmt: skip
    # where the parties run
    executor: str = _opt(
        "local", "local: every party in this process; ray: parties in Ray actors", "execution",
        EXECUTORS, tasks=ALL_TASKS,
    )  # fmt: skip
    workers: int = _opt(2, "ray: worker actors the parties are spread over", "execution",
                        tasks=ALL_TASKS)  # fmt: skip
    ray_address: str | None = _opt(
        None, "ray: a running cluster's address (default: start a local Ray)", "execution",
        tasks=ALL_TASKS, metavar="ADDRESS",
    )  # fmt: skip
    party_timeout: float | None = _opt(
        None, "ray: seconds a batch of party calls may take (default: no limit)", "execution",
        tasks=ALL_TASKS,
    )  # fmt: skip
    ray_co_host: bool = _opt(
        False, "ray: pack the server and key authorities onto the clients' workers (fewer "
        "processes; by default each has a worker of its own)", "execution", tasks=ALL_TASKS,
    )  # fmt: skip
    # bookkeeping
    threads: int = _opt(1, "torch intra-op threads", "output", tasks=ALL_TASKS)
    seeds: list[int] = _opt([0], "seeds (each draws its split and partition)", "output",
                            tasks=ALL_TASKS)  # fmt: skip
    output_dir: str = _opt("results", "results folder: each run writes <output-dir>/<name>/",
                           "output", tasks=ALL_TASKS, metavar="DIR")  # fmt: skip
    name: str | None = _opt(None, "run name (default: from the dataset)", "output",
                            tasks=ALL_TASKS)  # fmt: skip
    store_payloads: bool = _opt(False, "keep every message's payload in the transcript", "output")
    # every installed family's section, by name (securefgl.config.families)
    sections: dict[str, Any] = field(default_factory=dict, metadata={"internal": True})

    def __init__(self, **values: Any) -> None:
        generic = [f for f in dataclasses.fields(self) if f.name not in ("protocol", "sections")]
        known = sections()
        given_sections = dict(values.pop("sections", None) or {})
        refuse_unknown(values, [f.name for f in generic] + ["protocol", *known])
        defaults = task_defaults(str(values.get("task", "node")))
        for f in generic:
            if f.name in values:
                value = values.pop(f.name)
            elif f.name in defaults:
                value = copy.deepcopy(defaults[f.name])
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                value = f.default
            setattr(self, f.name, checked(f.name, value, hints(type(self))[f.name]))
        self.protocol = _protocol(values.pop("protocol", None))
        self.sections = {}
        for name, section in known.items():
            value = values.pop(name, given_sections.pop(name, None))
            default = section.settings()
            self.sections[name] = default if value is None else updated(name, default, value)
        if given_sections:
            unknown_keys("section", given_sections, known)
        self.validate()

    @property
    def clients_per_round(self) -> int:
        """The clients a round samples (the expected number under Poisson sampling)."""
        return max(1, round(self.client_fraction * self.clients))

    def __getattr__(self, name: str) -> Any:
        """A section by name (``config.fedstruct``); code should prefer :meth:`section`."""
        found = self.__dict__.get("sections", {})
        if name in found:
            return found[name]
        raise AttributeError(
            f"ExperimentConfig has no field or section {name!r}"
            f"{did_you_mean(name, [*found, *(f.name for f in dataclasses.fields(self))])}"
        )

    def section(self, kind: type[S]) -> S:
        """The settings of the section whose class is ``kind``."""
        for value in self.sections.values():
            if type(value) is kind:
                return value
        raise ConfigError(f"no installed family has the settings class {kind.__name__}")

    def is_default(self, name: str) -> bool:
        """Whether generic field ``name`` holds its default for this task."""
        f = next(f for f in dataclasses.fields(self) if f.name == name)
        defaults = task_defaults(self.task)
        if name in defaults:
            return bool(getattr(self, name) == defaults[name])
        factory = f.default_factory
        default = f.default if factory is dataclasses.MISSING else factory()
        return bool(getattr(self, name) == default)

    def _refuse_other_tasks_fields(self) -> None:
        """A field set away from its default that the task does not read is refused (it
        would be recorded as applied and do nothing), naming the task's own setting."""
        for f in dataclasses.fields(self):
            tasks = f.metadata.get("tasks")
            if not tasks or self.task in tasks or self.is_default(f.name):
                continue
            own = [
                f"[experiment.{section.name}] {f.name} "
                f"(--{section.prefix}{f.name.replace('_', '-')})"
                for section in task_sections(self.task)
                if f.name in {g.name for g in dataclasses.fields(section.settings)}
            ]
            hint = f"; use {own[0]}" if own else ""
            raise ConfigError(f"{f.name} does not apply to task {self.task!r}{hint}")

    def refuse_unread_protocol_settings(self) -> None:
        """:class:`ConfigError` naming the protocol settings this stack would never read
        (:meth:`ProtocolSettings.ignored_settings`); run before any work."""
        ignored = self.protocol.ignored_settings()
        if ignored:
            raise ConfigError(f"protocol {self.protocol.label!r} would ignore "
                              f"{'; '.join(ignored)}: drop them or change the stack")

    def validate(self) -> ExperimentConfig:
        """Check every generic field and section (run on construction); returns ``self``."""
        _choice("task", self.task, TASKS)
        self._refuse_other_tasks_fields()
        resolve = {"node": resolve_name, "graph": resolve_graph_name,
                   "recommendation": resolve_rating_name}[self.task]  # fmt: skip
        try:
            resolve(self.dataset)
        except ValueError as err:
            hint = f" (--task {self.task} needs a {self.task} dataset)" * (self.task != "node")
            raise ConfigError(f"{err}{hint}") from None
        if not self.algorithms:
            self.algorithms = default_algorithms(self.task)
            if not self.algorithms:
                raise ConfigError(f"algorithms: give at least one algorithm for task {self.task}")
        for name in self.algorithms:
            check_algorithm(name, self.task)
        _choice("partition", self.partition, PARTITIONS)
        if self.partition_cut is not None and not 0 < self.partition_cut < 1:
            raise ConfigError(f"partition_cut must lie in (0, 1), got {self.partition_cut!r}")
        _choice("split_scope", self.split_scope, SPLIT_SCOPES)
        if self.cross_edges is not None:
            _choice("cross_edges", self.cross_edges, CROSS_EDGES)
        _choice("model", self.model, MODEL_NAMES)
        _choice("server_optimizer", self.server_optimizer, ("adam", "sgd"))
        _choice("client_sampling", self.client_sampling, ("fixed", "poisson"))
        check_run_name(self.name)
        try:
            check_csbm_options(self.csbm)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"csbm: {err}") from None
        self._validate_split()
        for key in ("clients", "hidden", "layers", "rounds", "local_epochs", "eval_every"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"{key} must be ≥ 1, got {getattr(self, key)}")
        if self.secure_evaluation and self.clients < 2:
            raise ConfigError("secure_evaluation sums the evaluation of 2 or more clients "
                              f"(got clients={self.clients})")  # fmt: skip
        if not 1 <= self.edge_servers <= self.clients:
            raise ConfigError(f"edge_servers must lie in [1, clients], got {self.edge_servers}")
        try:
            parse_topology(self.server_topology, self.edge_servers)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if not 0 < self.client_fraction <= 1:
            raise ConfigError(f"client_fraction must lie in (0, 1], got {self.client_fraction}")
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"dropout must lie in [0, 1), got {self.dropout}")
        for key in ("lr", "client_lr"):
            if not 0 < getattr(self, key) < math.inf:
                raise ConfigError(f"{key} must be a finite number > 0, got {getattr(self, key)}")
        for key in ("weight_decay", "mu"):
            if not 0 <= getattr(self, key) < math.inf:
                raise ConfigError(f"{key} must be a finite number ≥ 0, got {getattr(self, key)}")
        if not self.seeds:
            raise ConfigError("seeds: give at least one seed")
        if min(self.seeds) < 0 or max(self.seeds) >= 2**32 or len(set(self.seeds)) != len(
            self.seeds
        ):
            raise ConfigError(f"seeds must be distinct integers in [0, 2**32), got {self.seeds}")
        if len(set(self.algorithms)) != len(self.algorithms):
            raise ConfigError(f"algorithms: each at most once, got {self.algorithms}")
        if self.threads < 1:
            raise ConfigError(f"threads must be ≥ 1, got {self.threads}")
        _choice("executor", self.executor, EXECUTORS)
        if self.workers < 1:
            raise ConfigError(f"workers must be ≥ 1, got {self.workers}")
        if self.party_timeout is not None and not 0 < self.party_timeout < math.inf:
            raise ConfigError(f"party_timeout must be a finite number of seconds > 0 (unset: no "
                              f"limit), got {self.party_timeout}")  # fmt: skip
        if not 0 <= self.protocol.dp_colluding_clients < self.clients:
            raise ConfigError(
                "protocol.dp_colluding_clients must lie in [0, clients), got "
                f"{self.protocol.dp_colluding_clients}"
            )
        per_round, sampling = self.round_clients()
        try:
            self.protocol.check_sampling(sampling)
            self.protocol.cohort_floor(per_round, sampling)
            self.protocol.check_cohort(per_round)
            if self.task == "recommendation":  # one server: a round's users hold the shares
                self.protocol.check_full_round(per_round)
        except ValueError as err:
            raise ConfigError(f"protocol: {err}") from None
        for name, value in self.sections.items():
            check = getattr(value, "check", None)  # checks that need the whole experiment
            if check is not None:
                try:
                    check(self)
                except ValueError as err:
                    if isinstance(err, ConfigError):
                        raise
                    raise ConfigError(f"{name}: {err}") from None
        return self

    def _validate_split(self) -> None:
        fractions = {
            "train_fraction": self.train_fraction,
            "val_fraction": self.val_fraction,
            "test_fraction": self.test_fraction,
        }
        if self.label_rate is not None:
            fractions["label_rate"] = self.label_rate
        for key, value in fractions.items():
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{key} must lie in [0, 1], got {value}")
        if self.label_rate is not None:
            given = [k for k in ("train_fraction", "test_fraction") if not self.is_default(k)]
            if given:
                raise ConfigError(f"label_rate sets the train fraction and the test fraction "
                                  f"(the rest after val_fraction): drop {' and '.join(given)}, "
                                  "or label_rate")  # fmt: skip
            if self.label_rate + self.val_fraction >= 1:
                raise ConfigError(f"label_rate {self.label_rate} + val_fraction "
                                  f"{self.val_fraction} leave no test nodes (must sum to < 1)")
        train, val, test = self.split
        if train + val + test > 1 + 1e-9:
            raise ConfigError(f"train + val + test fractions sum to {train + val + test:.3f} > 1")
        if train <= 0 or test <= 0:
            raise ConfigError("train and test fractions must be positive")

    @property
    def split(self) -> tuple[float, float, float]:
        """(train, val, test) fractions after applying ``label_rate``."""
        if self.label_rate is None:
            return self.train_fraction, self.val_fraction, self.test_fraction
        return self.label_rate, self.val_fraction, 1 - self.val_fraction - self.label_rate

    def replace(self, **changes: Any) -> ExperimentConfig:
        """A validated copy with ``changes``; a section given as a dict updates only the
        named fields of that section (``fedstruct={"nsf": "degree"}``, ``protocol={...}``);
        ``protocol=[...]`` names a new stack, and the protocol settings it would not read
        return to their defaults (e.g. ``dp_noise`` without clip_noise)."""
        values: dict[str, Any] = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self) if f.name not in ("protocol", "sections")
        }  # fmt: skip
        values.update(self.sections)
        protocol = changes.pop("protocol", None)
        values["protocol"] = _protocol(protocol, self.protocol)
        for name, value in changes.items():
            if name in self.sections:
                values[name] = updated(name, self.sections[name], value)
            else:
                values[name] = value
        return ExperimentConfig(**values)

    def to_dict(self) -> dict[str, Any]:
        """Plain data: generic fields, then ``protocol`` and every section as tables."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name not in ("protocol", "sections")}  # fmt: skip
        for name, settings in [("protocol", self.protocol), *self.sections.items()]:
            out[name] = {f.name: getattr(settings, f.name) for f in public_fields(type(settings))}
        return copy.deepcopy(out)

    def round_clients(self) -> tuple[int, str]:
        """The clients of a round and how they are drawn (recommendation: its users, a
        fixed number)."""
        if self.task == "recommendation":
            return self.sections["recommendation"].users_per_round, "fixed"
        return self.clients_per_round, self.client_sampling

    def resolved(self) -> dict[str, Any]:
        """:meth:`to_dict` with what a run derives filled in: the protocol stack's transport,
        DP mechanism, secure-sum mode and enforced minimum cohort, and every section that
        resolves itself against the experiment (``resolve(config)``, e.g. FedStruct's
        dataset preset)."""
        out = self.to_dict()
        p = self.protocol
        per_round, sampling = self.round_clients()
        out["protocol"].update(
            transport=p.transport, mechanism=p.mechanism, secure_sum_mode=p.secure_sum_mode(),
            min_cohort_enforced=p.cohort_floor(per_round, sampling),
        )  # fmt: skip
        for name, settings in self.sections.items():
            resolve = getattr(settings, "resolve", None)
            if resolve is not None:
                done = resolve(self)
                out[name] = {f.name: getattr(done, f.name) for f in public_fields(type(done))}
        return copy.deepcopy(out)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ExperimentConfig:
        """From plain data (a TOML table): sections are sub-tables; unknown keys are
        refused with the section they belong to, if any."""
        values = dict(values)
        known = sections()
        if isinstance(values.get("protocol"), dict):
            refuse_misplaced("protocol", values["protocol"], _generic_keys())
        for name, section in known.items():
            if isinstance(values.get(name), dict):
                refuse_misplaced(name, values[name], _generic_keys())
                values[name] = settings_from_dict(name, section.settings, values[name])
        return cls(**values)

    @classmethod
    def from_toml(cls, path: str | Path, tables: Collection[str] = ()) -> ExperimentConfig:
        """From a TOML file: keys under ``[experiment]`` or all at the top level; ``tables``:
        other top-level tables that another reader takes (e.g. ``securefgl sweep``'s
        ``[sweep]``)."""
        try:
            with open(path, "rb") as fh:
                values = tomllib.load(fh)
        except FileNotFoundError as err:
            raise ConfigError(f"config file {path} does not exist") from err
        except OSError as err:
            raise ConfigError(f"config file {path} cannot be read: {err.strerror}") from err
        except UnicodeDecodeError as err:
            raise ConfigError(f"config file {path} is not valid TOML: not UTF-8 text") from err
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"config file {path} is not valid TOML: {err}") from err
        if "experiment" in values:
            values, outside = values["experiment"], sorted(set(values) - {"experiment", *tables})
            if not isinstance(values, dict):
                raise ConfigError(f"config file {path}: experiment must be a table, "
                                  f"got {show(values)}")  # fmt: skip
            if outside:
                raise ConfigError(
                    f"config file {path}: keys {outside} are outside [experiment]; put every "
                    "key under [experiment] (or none)"
                )
        else:
            values = {k: v for k, v in values.items() if k not in tables}
        try:
            return cls.from_dict(values)
        except ConfigError as err:
            raise ConfigError(f"config file {path}: {err}") from None


def _protocol(value: Any, base: ProtocolSettings | None = None) -> ProtocolSettings:
    """The ``protocol`` section from a table, a settings object, or a list (the stack)."""
    base = base or ProtocolSettings()
    if value is None or value is base:
        return base
    if isinstance(value, list | tuple):  # a new stack: what it would not read is reset
        new = updated("protocol", base, {"stack": list(value)})
        stale = [s.split(" ", 1)[0] for s in new.ignored_settings()]
        return new.replace(**{k: getattr(ProtocolSettings(), k) for k in stale})
    if not isinstance(value, dict | ProtocolSettings):
        raise ConfigError(
            "protocol must be a table ([experiment.protocol]) or a list of protocol names "
            f'(e.g. ["secagg"]), got {show(value)}'
        )
    return updated("protocol", base, value)


def _generic_keys() -> list[str]:
    return [f.name for f in dataclasses.fields(ExperimentConfig)
            if f.name not in ("protocol", "sections")]  # fmt: skip


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(
            f"unknown {key} value {value!r}{did_you_mean(str(value), allowed)}; choose from "
            f"{list(allowed)}"
        )


def check_run_name(name: str | None) -> None:
    """Refuse a run ``name`` that is not one plain folder name (``/``, ``..``, absolute)."""
    if name is None:
        return
    if (
        not name.strip()
        or name in (".", "..")
        or any(sep in name for sep in ("/", "\\", os.sep, "\0"))
        or os.path.isabs(name)
    ):
        raise ConfigError(
            f"name {name!r} must be a plain folder name under output_dir "
            "(no '/', '\\', '..' or absolute path)"
        )

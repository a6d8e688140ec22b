"""Experiment configuration: one dataclass, from Python, a TOML file or CLI flags.

Generic settings are fields of :class:`ExperimentConfig`; each algorithm family's settings
are a nested section (:data:`SECTIONS`: ``config.fedstruct``, TOML
``[experiment.fedstruct]``). A configuration is validated when it is built: a bad value
raises :class:`ConfigError` naming the field and the allowed values. Each field's
``metadata`` gives its CLI help, choices and group (``securefgl.cli``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import numbers
import os
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocols.base import Role
from protocols.dp.accounting import KINDS as ACCOUNTANT_KINDS
from protocols.identity import THREAT_MODELS
from protocols.registry import TRANSPORTS, parse_stack, secure_sum_for_stack
from securefgl.data.datasets import resolve_name
from securefgl.data.graph_datasets import resolve_graph_name
from securefgl.data.synthetic import check_csbm_options
from securefgl.federation.topology import parse_topology
from securefgl.fedgcn.settings import FedGCNSettings
from securefgl.fedgls.settings import FedGLSSettings
from securefgl.fedsage.settings import FedSageSettings
from securefgl.fedstruct.settings import FedStructOptions, FedStructSettings
from securefgl.gpfl.settings import GPFLSettings
from securefgl.graphcls.settings import GraphTaskSettings
from securefgl.spreadfgl.settings import SpreadFGLSettings

EXECUTORS = ("local", "ray")
PARTITIONS = ("random", "louvain", "kmeans", "louvain-largest", "louvain-chunks")
SPLIT_SCOPES = ("global", "client")
CROSS_EDGES = ("hidden", "known")
MODEL_NAMES = ("gcn", "sage", "mlp")
TASKS = ("node", "graph")

#: Nested per-algorithm sections: field name -> settings class (all fields optional or
#: defaulted, validated on construction).
SECTIONS: dict[str, type] = {
    "fedstruct": FedStructOptions,
    "fedgcn": FedGCNSettings,
    "fedgls": FedGLSSettings,
    "graph": GraphTaskSettings,
    "gpfl": GPFLSettings,
    "spreadfgl": SpreadFGLSettings,
    "fedsage": FedSageSettings,
}


class ConfigError(ValueError):
    """An invalid experiment configuration."""


def _opt(default: Any, help: str, group: str, choices: tuple[Any, ...] | None = None) -> Any:
    meta = {"help": help, "group": group, "choices": choices}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class ExperimentConfig:
    # data
    task: str = _opt(
        "node", "node: classify the nodes of one graph; graph: classify whole graphs (each "
        "client holds its own graphs, [experiment.graph])", "data", TASKS,
    )  # fmt: skip
    dataset: str = _opt("csbm", "dataset name (`securefgl datasets`) or csbm", "data")
    data_root: str | None = _opt(None, "data root (default: $SECUREFGL_DATA)", "data")
    download: bool = _opt(
        False, "let PyG download a dataset missing from the data root (off: never)", "data"
    )
    # generator options for "csbm": weak features + homophilous edges, so that structure
    # matters (central ≫ local) and the demo's comparison is informative
    csbm: dict[str, Any] = _opt(
        {"num_nodes": 3000, "feature_signal": 0.2, "homophily": 0.7},
        "generator options as JSON, e.g. '{\"num_nodes\": 5000}'",
        "data",
    )
    normalize_features: bool = _opt(
        False, "divide each node's non-negative features by their sum (at least 1; PyG's "
        "NormalizeFeatures; a per-node step each client can do on its own nodes)", "data",
    )  # fmt: skip
    train_fraction: float = _opt(0.1, "training nodes", "data")
    val_fraction: float = _opt(0.1, "validation nodes", "data")
    test_fraction: float = _opt(0.8, "test nodes", "data")
    label_rate: float | None = _opt(None, "if set: train = label_rate, test = rest", "data")
    split_scope: str = _opt(
        "global", "global: one split of all nodes; client: the fractions drawn inside each "
        "client (FedSage+, FedGLS)", "data", SPLIT_SCOPES,
    )  # fmt: skip
    # federation
    clients: int = _opt(10, "number of clients K", "federation")
    partition: str = _opt("louvain", "how nodes are split into clients", "federation", PARTITIONS)
    partition_cut: float | None = _opt(
        None, "raise the edge cut to this fraction by swapping random nodes' clients (sizes "
        "kept): a stress test for a paper's reported missing links", "federation",
    )  # fmt: skip
    cross_edges: str | None = _opt(
        None, "what clients know of cross-client edges (default: by algorithm)", "federation",
        CROSS_EDGES,
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
        ["fedavg", "local", "central"], "algorithms to compare (`securefgl.registry`)", "federation"
    )
    edge_servers: int = _opt(1, "edge servers N (spreadfgl), each covering a block of clients",
                             "federation")  # fmt: skip
    server_topology: str = _opt(
        "ring", "edge-server adjacency: ring, line, complete, star, none or '0-1,1-2'",
        "federation",
    )  # fmt: skip
    # protocol stack
    protocol: list[str] = _opt(
        [], "aggregation stack, e.g. secagg,clip_noise (empty: plain)", "protocol stack"
    )
    secagg_k: int | None = _opt(None, "secagg+ neighbours (default 2⌈log2 n⌉)", "protocol stack")
    secagg_threshold: float | None = _opt(
        None, "Shamir t: a count (> 1) or a fraction of share holders", "protocol stack"
    )
    threat_model: str = _opt(
        "honest-but-curious",
        "the server's threat model: malicious adds signed messages (Ed25519 PKI set up by the "
        "experiment) and consistency checks to secagg, secagg+, ckks and the masked / ckks "
        "secure sums (docs/protocols.md)",
        "protocol stack",
        THREAT_MODELS,
    )
    dp_clip: float = _opt(1.0, "clip_noise: L2 clip of an update; ldp_*: clip", "protocol stack")
    dp_noise: float = _opt(1.0, "noise multiplier σ (clip_noise, ldp_gaussian)", "protocol stack")
    dp_epsilon: float = _opt(1.0, "ldp_laplace: ε per released update", "protocol stack")
    dp_delta: float = _opt(1e-5, "δ of the reported (ε, δ)", "protocol stack")
    dp_mode: str = _opt(
        "auto", "clip_noise: noise at the server or as client shares", "protocol stack",
        ("auto", "central", "distributed"),
    )  # fmt: skip
    dp_accountant: str = _opt("rdp", "Opacus accountant", "protocol stack", ACCOUNTANT_KINDS)
    dp_colluding_clients: int = _opt(
        0, "distributed noise: clients assumed to collude with the server (accounted)",
        "protocol stack",
    )  # fmt: skip
    seeded_noise: bool = _opt(
        False,
        "NOT PRIVATE: draw all privacy noise from the public experiment seed (reproducible "
        "debugging runs; results are marked not private)",
        "protocol stack",
    )
    # model and training
    model: str = _opt("gcn", "backbone of fedavg / fedprox / local / central", "training",
                      MODEL_NAMES)  # fmt: skip
    hidden: int = _opt(64, "hidden width", "training")
    layers: int = _opt(2, "layers", "training")
    dropout: float = _opt(0.5, "dropout", "training")
    lr: float = _opt(0.01, "Adam lr (local, central; the server optimizer's in fedavg)", "training")
    weight_decay: float = _opt(5e-4, "weight decay", "training")
    rounds: int = _opt(100, "rounds (epochs for local / central)", "training")
    local_epochs: int = _opt(1, "local SGD steps per round (fedavg / fedprox)", "training")
    client_lr: float = _opt(1.0, "local SGD lr (1 step at lr 1 = FedSGD)", "training")
    server_optimizer: str = _opt("adam", "adam (FedAdam) or sgd (lr 1 = FedAvg)", "training",
                                 ("adam", "sgd"))  # fmt: skip
    mu: float = _opt(0.01, "FedProx proximal weight", "training")
    eval_every: int = _opt(10, "rounds between evaluations", "training")
    # per-algorithm sections
    fedstruct: FedStructOptions = field(default_factory=FedStructOptions)
    fedgcn: FedGCNSettings = field(default_factory=FedGCNSettings)
    fedgls: FedGLSSettings = field(default_factory=FedGLSSettings)
    graph: GraphTaskSettings = field(default_factory=GraphTaskSettings)
    gpfl: GPFLSettings = field(default_factory=GPFLSettings)
    spreadfgl: SpreadFGLSettings = field(default_factory=SpreadFGLSettings)
    fedsage: FedSageSettings = field(default_factory=FedSageSettings)
    # where the parties run
    executor: str = _opt(
        "local", "local: every party in this process; ray: parties in Ray actors", "execution",
        EXECUTORS,
    )  # fmt: skip
    workers: int = _opt(2, "ray: worker actors the parties are spread over", "execution")
    ray_address: str | None = _opt(
        None, "ray: a running cluster's address (default: start a local Ray)", "execution"
    )
    party_timeout: float | None = _opt(
        None, "ray: seconds a batch of party calls may take (default: no limit)", "execution"
    )
    # bookkeeping
    threads: int = _opt(1, "torch intra-op threads", "output")
    seeds: list[int] = _opt([0], "seeds (each draws its split and partition)", "output")
    output_dir: str = _opt("results", "results folder", "output")
    name: str | None = _opt(None, "run name (default: from the dataset)", "output")
    store_payloads: bool = _opt(False, "keep every message's payload in the transcript", "output")

    def __post_init__(self) -> None:
        _check_types(self)
        for name, kind in SECTIONS.items():
            section = getattr(self, name)
            if isinstance(section, dict):
                setattr(self, name, _section_from_dict(name, kind, section))
            elif not isinstance(section, kind):
                raise ConfigError(
                    f"{name} must be a table ([experiment.{name}]) of {kind.__name__} fields, "
                    f"got {_show(section)}"
                )
        self.validate()

    def validate(self) -> ExperimentConfig:
        """Check every generic field and section (run on construction); returns ``self``."""
        _choice("task", self.task, TASKS)
        try:
            (resolve_graph_name if self.task == "graph" else resolve_name)(self.dataset)
        except ValueError as err:
            hint = " (--task graph needs a graph dataset)" if self.task == "graph" else ""
            raise ConfigError(f"{err}{hint}") from None
        _choice("partition", self.partition, PARTITIONS)
        if self.partition_cut is not None and not 0 < self.partition_cut < 1:
            raise ConfigError(f"partition_cut must lie in (0, 1), got {self.partition_cut!r}")
        _choice("split_scope", self.split_scope, SPLIT_SCOPES)
        if self.cross_edges is not None:
            _choice("cross_edges", self.cross_edges, CROSS_EDGES)
        _choice("model", self.model, MODEL_NAMES)
        _choice("server_optimizer", self.server_optimizer, ("adam", "sgd"))
        _choice("dp_mode", self.dp_mode, ("auto", "central", "distributed"))
        _choice("dp_accountant", self.dp_accountant, ACCOUNTANT_KINDS)
        _choice("client_sampling", self.client_sampling, ("fixed", "poisson"))
        _choice("threat_model", self.threat_model, THREAT_MODELS)
        try:
            transport, mechanism = parse_stack(self.protocol)
        except ValueError as err:
            raise ConfigError(f"protocol: {err}") from None
        t, k = self.secagg_threshold, self.secagg_k
        if t is not None and (t <= 0.5 or 1 < t < 2 or (isinstance(t, int) and t == 1)):
            raise ConfigError(
                f"secagg_threshold must be a fraction in (0.5, 1] or a count ≥ 2 (Shamir t must "
                f"exceed half of the share holders), got {t}"
            )
        if k is not None and (k < 2 or k % 2):
            raise ConfigError(f"secagg_k must be an even integer ≥ 2, got {k}")
        if mechanism == "clip_noise" and self.dp_mode == "central":
            role = TRANSPORTS[transport].output_role
            if role is not Role.SERVER:
                raise ConfigError(
                    f"dp_mode = 'central' cannot be used with protocol {transport!r}: central "
                    f"noise is added by the server to the aggregate, but {transport!r} "
                    f"delivers the aggregate to the {role.value}s and the server never sees it; "
                    "use dp_mode = 'distributed' (or 'auto')"
                )
        check_run_name(self.name)
        try:
            check_csbm_options(self.csbm)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"csbm: {err}") from None
        if self.dp_clip <= 0 or self.dp_noise < 0 or self.dp_epsilon <= 0:
            raise ConfigError("dp_clip and dp_epsilon must be > 0, dp_noise ≥ 0")
        if not 0 < self.dp_delta < 1:
            raise ConfigError(f"dp_delta must lie in (0, 1), got {self.dp_delta}")
        if not self.algorithms:
            raise ConfigError("algorithms: give at least one algorithm")
        self._validate_split()
        for key in ("clients", "hidden", "layers", "rounds", "local_epochs", "eval_every"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"{key} must be ≥ 1, got {getattr(self, key)}")
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
        if self.lr <= 0 or self.client_lr <= 0 or self.weight_decay < 0 or self.mu < 0:
            raise ConfigError("lr and client_lr must be > 0; weight_decay and mu must be ≥ 0")
        if not self.seeds:
            raise ConfigError("seeds: give at least one seed")
        if self.threads < 1:
            raise ConfigError(f"threads must be ≥ 1, got {self.threads}")
        _choice("executor", self.executor, EXECUTORS)
        if self.workers < 1:
            raise ConfigError(f"workers must be ≥ 1, got {self.workers}")
        if self.party_timeout is not None and not self.party_timeout > 0:
            raise ConfigError(f"party_timeout must be > 0 seconds, got {self.party_timeout}")
        if not 0 <= self.dp_colluding_clients < self.clients:
            raise ConfigError(
                f"dp_colluding_clients must lie in [0, clients), got {self.dp_colluding_clients}"
            )
        for name, kind in SECTIONS.items():
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"{name} must be a {kind.__name__} (or a dict of its fields)")
        try:
            self.fedstruct_settings()
        except ValueError as err:
            raise ConfigError(f"fedstruct: {err}") from None
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
        train, val, test = self.split
        if train + val + test > 1 + 1e-9:
            raise ConfigError(f"train + val + test fractions sum to {train + val + test:.3f} > 1")
        if train <= 0 or test <= 0:
            raise ConfigError("train and test fractions must be positive")

    def fedstruct_settings(self) -> FedStructSettings:
        """FedStruct's settings: the dataset's Table 5 preset ← the ``fedstruct`` section ←
        this experiment's lr, weight decay and dropout; Ā's hop sums default to what the
        transport implies (plain → plain, secagg/secagg+ → masked, ckks → ckks)."""
        options = self.fedstruct
        if options.abar_sum is None:
            options = options.replace(abar_sum=secure_sum_for_stack(self.protocol))
        return FedStructSettings.resolve(
            options,
            self.dataset,
            lr=self.lr,
            weight_decay=self.weight_decay,
            dropout=self.dropout,
        )

    @property
    def split(self) -> tuple[float, float, float]:
        """(train, val, test) fractions after applying ``label_rate``."""
        if self.label_rate is None:
            return self.train_fraction, self.val_fraction, self.test_fraction
        return self.label_rate, self.val_fraction, 1 - self.val_fraction - self.label_rate

    def replace(self, **changes: Any) -> ExperimentConfig:
        """A validated copy with ``changes``; a section given as a dict updates only the
        named fields of that section (``fedstruct={"nsf": "degree"}``)."""
        for name in SECTIONS:
            if isinstance(changes.get(name), dict):
                changes[name] = getattr(self, name).replace(**changes[name])
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ExperimentConfig:
        """From plain data (a TOML table): sections are sub-tables; unknown keys are
        refused with the section they belong to, if any."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = dict(values)
        for name, kind in SECTIONS.items():
            if isinstance(values.get(name), dict):
                values[name] = _section_from_dict(name, kind, values[name])
        unknown = sorted(set(values) - names)
        if unknown:
            homes = {
                key: name
                for key in unknown
                for name, kind in SECTIONS.items()
                if key in _section_keys(kind)
            }
            where = "".join(f"; {k!r} belongs under [experiment.{s}]" for k, s in homes.items())
            raise ConfigError(f"unknown config keys {unknown}{where}; known keys: {sorted(names)}")
        return cls(**values)

    @classmethod
    def from_toml(cls, path: str | Path) -> ExperimentConfig:
        """From a TOML file: keys under ``[experiment]`` or all at the top level."""
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
            values, outside = values["experiment"], sorted(set(values) - {"experiment"})
            if not isinstance(values, dict):
                raise ConfigError(f"config file {path}: experiment must be a table, "
                                  f"got {_show(values)}")  # fmt: skip
            if outside:
                raise ConfigError(
                    f"config file {path}: keys {outside} are outside [experiment]; put every "
                    "key under [experiment] (or none)"
                )
        try:
            return cls.from_dict(values)
        except ConfigError as err:
            raise ConfigError(f"config file {path}: {err}") from None


def section_aliases(kind: type) -> dict[str, str]:
    """``alias -> field`` of a section (e.g. FedStruct's ``adjacency`` = ``abar_sum``)."""
    return {
        f.metadata["alias"]: f.name for f in dataclasses.fields(kind) if "alias" in f.metadata
    }


def _section_keys(kind: type) -> set[str]:
    return {f.name for f in dataclasses.fields(kind)} | set(section_aliases(kind))


def _section_from_dict(name: str, kind: type, values: dict[str, Any]) -> Any:
    values = dict(values)
    for alias, target in section_aliases(kind).items():
        if alias in values:
            if target in values:
                raise ConfigError(f"[{name}]: give {alias!r} or {target!r}, not both")
            values[target] = values.pop(alias)
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(kind)})
    if unknown:
        raise ConfigError(f"unknown [{name}] keys {unknown}; known: {sorted(_section_keys(kind))}")
    hints = _hints(kind)
    values = {k: _checked(f"{name}.{k}", v, hints[k]) for k, v in values.items()}
    try:
        return kind(**values)
    except ValueError as err:
        raise ConfigError(f"{name}: {err}") from None


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"unknown {key} value {value!r}; choose from {list(allowed)}")


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


# ----------------------------------------------------------------------- field types

_KINDS = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    return typing.get_type_hints(kind)


def _show(value: Any) -> str:
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


def _checked(name: str, value: Any, hint: Any) -> Any:
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
                return _checked(name, value, arg)
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
        items = [_checked(f"{name}[{i}]", v, elem) for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    elif (origin is dict or hint is dict) and isinstance(value, dict):
        return value
    elif origin is None and inspect.isclass(hint) and hint not in _KINDS:
        return _instance(name, value, hint)
    note = ' (e.g. ["secagg"])' if name == "protocol" else ""
    note += " (not NaN)" if isinstance(value, float) and value != value else ""
    raise ConfigError(f"{name} must be {_describe(hint)}{note}, got {_show(value)}")


def _instance(name: str, value: Any, kind: type) -> Any:
    if not isinstance(value, kind):
        raise ConfigError(f"{name} must be a {kind.__name__}, got {_show(value)}")
    return value


def _check_types(config: Any) -> None:
    """Check (and convert) every non-section field of a dataclass against its type."""
    hints = _hints(type(config))
    for f in dataclasses.fields(config):
        if f.name not in SECTIONS:
            value = getattr(config, f.name)
            setattr(config, f.name, _checked(f.name, value, hints[f.name]))

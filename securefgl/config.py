"""Experiment configuration: one dataclass, from Python, a TOML file or CLI flags.

Every field is validated in :meth:`ExperimentConfig.validate`, which raises
:class:`ConfigError` naming the field and the allowed values.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocols.registry import parse_stack

PARTITIONS = ("random", "louvain", "kmeans")
CROSS_EDGES = ("hidden", "known")
MODEL_NAMES = ("gcn", "sage", "mlp")


class ConfigError(ValueError):
    """An invalid experiment configuration."""


@dataclass
class ExperimentConfig:
    # data
    dataset: str = "csbm"
    data_root: str | None = None
    # generator options for dataset "csbm": weak features + homophilous edges, so structure
    # matters (central ≫ local) and the demo's comparison is informative
    csbm: dict[str, Any] = field(
        default_factory=lambda: {"num_nodes": 3000, "feature_signal": 0.2, "homophily": 0.7}
    )
    train_fraction: float = 0.1
    val_fraction: float = 0.1
    test_fraction: float = 0.8
    label_rate: float | None = None  # if set: train = label_rate, test = 1 - val - label_rate
    # federation
    clients: int = 10
    partition: str = "louvain"
    cross_edges: str | None = None  # hidden | known; None: known iff an algorithm needs it
    client_fraction: float = 1.0
    algorithms: list[str] = field(default_factory=lambda: ["fedavg", "local", "central"])
    protocol: list[str] = field(default_factory=list)  # aggregation stack; [] = plaintext
    secagg_k: int | None = None  # secagg+ neighbours (default 2·ceil(log2 n))
    secagg_threshold: float | None = None  # Shamir t (int) or fraction of share holders
    dp_clip: float = 1.0  # clip_noise: L2 clip of each update; ldp_*: clip bound
    dp_noise: float = 1.0  # noise multiplier σ (clip_noise, ldp_gaussian)
    dp_epsilon: float = 1.0  # ldp_laplace: ε per released update
    dp_delta: float = 1e-5
    dp_mode: str = "auto"  # clip_noise: central | distributed | auto (by transport)
    dp_accountant: str = "rdp"  # rdp | prv (Opacus accountants)
    # model and training
    model: str = "gcn"
    hidden: int = 64
    layers: int = 2
    dropout: float = 0.5
    lr: float = 0.01  # Adam lr of local/central; the server optimizer's lr in fedavg/fedprox
    weight_decay: float = 5e-4
    rounds: int = 100
    local_epochs: int = 1
    client_lr: float = 1.0  # local SGD lr in fedavg/fedprox (1 step at lr 1 = FedSGD)
    server_optimizer: str = "adam"  # "adam" (FedAdam/FedSGD+Adam) or "sgd" (lr 1 = FedAvg)
    mu: float = 0.01  # FedProx proximal weight (used by fedprox only)
    eval_every: int = 10
    # FedStruct (None = the dataset's Table 5 preset; see securefgl/fedstruct/presets.py)
    nsf: str | None = None  # degree | fedstar | random | hop2vec
    nsf_dim: int | None = None
    structure_mlp: bool | None = None
    structure_hops: int | None = None  # L_s
    structure_beta: list[float] | None = None
    prune: str | None = None  # none | sender | receiver
    prune_p: float | None = None
    feature_hops: int | None = None
    feature_hidden: list[int] | None = None
    structure_hidden: list[int] | None = None
    loss_weighting: str | None = None  # labelled | nodes
    abar: str | None = None  # federated | oracle (simulator computes Ā: not private)
    abar_sum: str | None = None  # plain | masked | ckks: how client i gets Σ_k B_ik
    abar_support: str | None = None  # rows | union (public support of masked/ckks sums)
    abar_relay: bool | None = None  # Ā blocks relayed by the server (else client to client)
    abar_collusion_threshold: int | None = None  # masked Ā sums: colluding senders tolerated
    abar_pair_masks: bool | None = None  # masked Ā sums: False = receiver masks only
    abar_ring_bits: int | None = None  # masked Ā sums in Z_2^64 (default) or Z_2^32 (faster)
    abar_degree_bound: int | None = None  # Z_2^32: public bound on boundary-node degrees
    abar_max_round_gib: float | None = None  # masked/ckks Ā: relay refuses bigger hops (inf: off)
    edge_dp: str | None = None  # edgerand | lapgraph: ε-edge DP on Ā's input blocks
    edge_epsilon: float | None = None  # its ε (the whole graph is ε-edge-DP)
    # bookkeeping
    threads: int = 1  # torch intra-op threads (small graphs on shared cores: 1 is fastest)
    seeds: list[int] = field(default_factory=lambda: [0])
    output_dir: str = "results"
    name: str | None = None
    store_payloads: bool = False

    @property
    def cross_edge_mode(self) -> str:
        """``cross_edges``, or when unset: ``known`` iff an algorithm needs it."""
        if self.cross_edges is not None:
            return self.cross_edges
        return "known" if {"fedstruct", "fedgcn"} & set(self.algorithms) else "hidden"

    def validate(self, known_algorithms: set[str] | None = None) -> ExperimentConfig:
        from securefgl.data.datasets import resolve_name  # local: keeps config import light

        try:
            resolve_name(self.dataset)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        _choice("partition", self.partition, PARTITIONS)
        _choice("cross_edges", self.cross_edge_mode, CROSS_EDGES)
        _choice("model", self.model, MODEL_NAMES)
        _choice("server_optimizer", self.server_optimizer, ("adam", "sgd"))
        _choice("dp_mode", self.dp_mode, ("auto", "central", "distributed"))
        _choice("dp_accountant", self.dp_accountant, ("rdp", "prv"))
        try:
            parse_stack(self.protocol)
        except ValueError as err:
            raise ConfigError(f"protocol: {err}") from None
        if self.dp_clip <= 0 or self.dp_noise < 0 or self.dp_epsilon <= 0:
            raise ConfigError("dp_clip and dp_epsilon must be > 0, dp_noise ≥ 0")
        if not 0 < self.dp_delta < 1:
            raise ConfigError(f"dp_delta must lie in (0, 1), got {self.dp_delta}")
        if known_algorithms is not None:
            for algo in self.algorithms:
                _choice("algorithms", algo, tuple(sorted(known_algorithms)))
        if not self.algorithms:
            raise ConfigError("algorithms: give at least one algorithm")
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
        train = self.label_rate if self.label_rate is not None else self.train_fraction
        test = 1 - self.val_fraction - train if self.label_rate is not None else self.test_fraction
        if train + self.val_fraction + test > 1 + 1e-9:
            raise ConfigError(
                f"train + val + test fractions sum to {train + self.val_fraction + test:.3f} > 1"
            )
        if train <= 0 or test <= 0:
            raise ConfigError("train and test fractions must be positive")
        for key in ("clients", "hidden", "layers", "rounds", "local_epochs", "eval_every"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"{key} must be ≥ 1, got {getattr(self, key)}")
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
        if "fedstruct" in self.algorithms:
            from securefgl.fedstruct.presets import FedStructSettings

            if self.cross_edge_mode != "known":
                raise ConfigError(
                    "fedstruct needs cross_edges = 'known' (its clients know "
                    "their edges to other clients' nodes)"
                )
            try:
                FedStructSettings.from_config(self)
            except ValueError as err:
                raise ConfigError(f"fedstruct: {err}") from None
        return self

    @property
    def split(self) -> tuple[float, float, float]:
        """(train, val, test) fractions after applying ``label_rate``."""
        if self.label_rate is None:
            return self.train_fraction, self.val_fraction, self.test_fraction
        return self.label_rate, self.val_fraction, 1 - self.val_fraction - self.label_rate

    def replace(self, **changes: Any) -> ExperimentConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ExperimentConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        values = dict(values)
        for alias, name in ALIASES.items():
            if alias in values:
                if name in values:
                    raise ConfigError(f"give {alias!r} or {name!r}, not both")
                values[name] = values.pop(alias)
        unknown = sorted(set(values) - names)
        if unknown:
            raise ConfigError(f"unknown config keys {unknown}; known keys: {sorted(names)}")
        return cls(**values)

    @classmethod
    def from_toml(cls, path: str | Path) -> ExperimentConfig:
        try:
            with open(path, "rb") as fh:
                values = tomllib.load(fh)
        except FileNotFoundError as err:
            raise ConfigError(f"config file {path} does not exist") from err
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"config file {path} is not valid TOML: {err}") from err
        values = values.get("experiment", values)
        return cls.from_dict(values)


#: Alternative config keys (and ``--flags``): ``adjacency`` = how Ā's hop sums run.
ALIASES = {"adjacency": "abar_sum"}


def _choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"unknown {key} value {value!r}; choose from {list(allowed)}")

"""The settings of a federated recommendation run (FeSoG / FedGNN), as they travel to
the parties (JSON)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal

from securefgl.algorithms.recommendation.fedgnn import ARCHS, LOSSES, OFFSETS
from securefgl.algorithms.recommendation.ldp import LDPConfig
from securefgl.config import ConfigError

Method = Literal["fesog", "fedgnn"]


@dataclass
class RecConfig:
    method: Method = "fesog"
    dim: int = 8
    rounds: int = 400
    users_per_round: int = 256
    lr: float = 0.1
    weight_decay: float = 1e-3
    pseudo_items: int = 10
    ldp: LDPConfig = field(default_factory=LDPConfig)
    backend: str = "plain"
    eval_every: int = 20
    patience: int = 5
    max_neighbors: int = 5
    expand_every: int = 20
    seed: int = 0
    seeded_noise: bool = False  # NOT PRIVATE: LDP noise and pseudo items from ``seed``
    keep_views: int = 0  # keep the server's views of the first k rounds (attacks)
    time_budget_s: float | None = None
    #: FedGNN only, flagged deviations for items without training ratings (:mod:`.fedgnn`)
    offset: str = "none"
    item_std: float = 1.0
    #: FedGNN's local graph and loss: ours (two-level, per-user RMSE) or the paper's (star,
    #: MSE; :mod:`.fedgnn`)
    arch: str = "two-level"
    loss: str = "rmse"
    #: parties that host the users (user u in group u mod G); each group's private
    #: randomness is its own, so results depend on this, not on the executor
    user_groups: int = 2
    executor: Literal["local", "ray"] = "local"
    workers: int = 2  # ray: worker processes
    ray_address: str | None = None  # ray: a running cluster (None: start a local Ray)
    party_timeout: float | None = None  # ray: seconds before a silent party is dropped

    def __post_init__(self) -> None:
        if self.method not in ("fesog", "fedgnn"):
            raise ConfigError(f"unknown recommendation method {self.method!r}")
        if self.user_groups < 1:
            raise ConfigError(f"user_groups must be >= 1, got {self.user_groups}")
        if self.executor not in ("local", "ray"):
            raise ConfigError(f"unknown executor {self.executor!r}; expected 'local' or 'ray'")
        fedgnn_only = (self.offset, self.item_std, self.arch, self.loss)
        if self.method == "fesog" and fedgnn_only != ("none", 1.0, "two-level", "rmse"):
            raise ConfigError(
                "offset, item_std, arch and loss are FedGNN's options (FeSoG keeps its code's)"
            )
        if self.arch not in ARCHS or self.loss not in LOSSES:
            raise ConfigError(f"unknown FedGNN arch / loss {self.arch!r} / {self.loss!r}")
        if self.offset not in OFFSETS:
            raise ConfigError(f"unknown offset {self.offset!r}; expected one of {OFFSETS}")
        if not self.item_std > 0:
            raise ConfigError(f"item_std must be > 0, got {self.item_std}")

    @property
    def noise_seed(self) -> int | None:
        """The seed of privacy randomness: None (secret) unless ``seeded_noise``."""
        return self.seed if self.seeded_noise else None

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> RecConfig:
        raw = json.loads(text)
        return cls(**{**raw, "ldp": LDPConfig(**raw["ldp"])})

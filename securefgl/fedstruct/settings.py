"""FedStruct's settings: the user's options, the paper's presets and the resolved settings.

FedStruct (Aliakbari et al., ICLR 2025). :class:`FedStructOptions` is the
``[experiment.fedstruct]`` section of a configuration: every field left ``None`` takes the
dataset's preset (:func:`preset_for`: Table 5's λ = λ_s, weight decay, epochs, L, L_s and
hidden sizes, plus the official code's dropout, which the paper does not give; datasets
without a row get :data:`GENERIC`). :meth:`FedStructSettings.resolve` applies the options to
the preset by field name and takes the optimisation settings (``lr``, ``weight_decay``,
``dropout``) from the experiment, like every other algorithm; :func:`apply_preset` writes a
preset's optimisation settings and epochs into an experiment for a faithful Table 5 run.

Pruning: ``prune="receiver"`` (default) keeps the top ``⌈p·n_i⌉`` values of each client's
``[Â^[i]]^ℓ`` after every hop, the per-client analogue of the official code's global
top-``p·n`` rule; ``"sender"`` is Alg. 3's Eq. 37; ``"none"`` is the paper's "-F". With
``abar="oracle"`` any value but ``"none"`` means the global rule.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from protocols.dp.graph_dp import edge_rand, lap_graph
from securefgl.data.datasets import resolve_name

__all__ = [
    "GENERIC",
    "NSF_KINDS",
    "PRESETS",
    "EdgeDP",
    "FedStructOptions",
    "FedStructSettings",
    "apply_preset",
    "preset_for",
]

NSF_KINDS = ("degree", "fedstar", "random", "hop2vec")
EDGE_DP_MECHANISMS = ("edgerand", "lapgraph")
ABAR_SUMS = ("plain", "masked", "ckks")
ABAR_SUPPORTS = ("rows", "union")
ABAR_MODES = ("federated", "oracle")
PRUNE_CHOICES = ("none", "sender", "receiver")
LOSS_WEIGHTINGS = ("labelled", "nodes")


@dataclass(frozen=True)
class EdgeDP:
    """Mechanism and budget: ``edgerand`` (randomised response, sparsity preserved) or
    ``lapgraph`` (Wu et al., S&P 2022); ``epsilon`` per edge (the whole graph is ε-edge-DP)."""

    mechanism: str
    epsilon: float

    def __post_init__(self) -> None:
        if self.mechanism not in EDGE_DP_MECHANISMS:
            raise ValueError(
                f"edge DP mechanism must be one of {EDGE_DP_MECHANISMS}, got {self.mechanism!r}"
            )
        if not self.epsilon > 0:
            raise ValueError(f"edge DP epsilon must be > 0, got {self.epsilon}")

    def perturb(
        self, block: sp.csr_matrix, symmetric: bool, rng: np.random.Generator
    ) -> sp.csr_matrix:
        if self.mechanism == "lapgraph":
            return lap_graph(block, self.epsilon, symmetric=symmetric, rng=rng)
        return edge_rand(block, self.epsilon, symmetric=symmetric, preserve_sparsity=True, rng=rng)


@dataclass(frozen=True)
class FedStructSettings:
    """FedStruct's hyper-parameters (defaults: a generic setting, see :data:`GENERIC`)."""

    nsf: str = "hop2vec"  # degree | fedstar | random | hop2vec (NSF_KINDS)
    nsf_dim: int = 256  # d_s
    structure_mlp: bool = True  # False: pure Hop2Vec (Eq. 15), S ∈ R^{n×c}, no g_θs
    structure_hops: int = 5  # L_s: Ā = Â^{L_s} (β_{L_s} = 1)
    structure_beta: tuple[float, ...] | None = None  # β_1..β_{L_s} (Eq. 2); None: one-hot
    prune: str = "receiver"  # none (the paper's "-F") | sender (Eq. 37) | receiver (PRUNE_MODES)
    prune_p: float = 30  # p: keep ~p·n entries of each Â^ℓ
    feature_hops: int = 2  # L of the local decoupled GCN (NFE)
    feature_hidden: tuple[int, ...] = (64,)
    structure_hidden: tuple[int, ...] = (256,)
    dropout: float = 0.5
    lr: float = 0.005  # λ = λ_s (Adam)
    weight_decay: float = 5e-4
    epochs: int = 50  # FL rounds
    rw_steps: int = 50  # fedstar: random-walk diagonals (official code)
    init_std: float = 0.05  # hop2vec: N(0, init_std²) (official code)
    loss_weighting: str = "labelled"  # paper Eq. 5 | "nodes": official code's n_i / n
    abar: str = "federated"  # Alg. 3 through the channel | "oracle" (simulator, not private)
    abar_sum: str = "plain"  # per-hop sum of the Ā build: plain (the paper's) | masked | ckks
    abar_support: str = "rows"  # secure sums' public coordinates: rows | union
    abar_relay: bool = False  # plain Ā blocks via the server (True) or client to client
    abar_collusion_threshold: int | None = None  # masked: None = mask every sender pair
    abar_pair_masks: bool = True  # masked: False = receiver masks only (ckks' trust)
    abar_ring_bits: int = 64  # masked: Z_2^64, or Z_2^32 (~20 % faster, Ā to ~1e-6)
    abar_degree_bound: int = 2047  # masked Z_2^32: public bound on boundary degrees
    abar_max_round_gib: float = 4.0  # masked/ckks: the relay refuses hops sending more
    abar_min_senders: int = 2  # masked/ckks: refuse receivers with fewer neighbouring clients
    edge_dp: EdgeDP | None = None  # ε-edge DP on Ā's input blocks (fedstruct.edge_dp)

    def __post_init__(self) -> None:
        if self.nsf not in NSF_KINDS:
            raise ValueError(f"unknown nsf {self.nsf!r}; choose from {list(NSF_KINDS)}")
        if self.abar not in ABAR_MODES:
            raise ValueError(f"unknown abar mode {self.abar!r}; choose from {list(ABAR_MODES)}")
        if self.loss_weighting not in LOSS_WEIGHTINGS:
            raise ValueError(
                f"unknown loss_weighting {self.loss_weighting!r}; "
                f"choose from {list(LOSS_WEIGHTINGS)}"
            )
        if self.prune not in PRUNE_CHOICES:
            raise ValueError(f"unknown prune {self.prune!r}; choose from {list(PRUNE_CHOICES)}")
        if not self.prune_p > 0:
            raise ValueError(f"prune_p must be > 0, got {self.prune_p}")
        for key in ("nsf_dim", "structure_hops", "epochs", "rw_steps"):
            if int(getattr(self, key)) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        if self.feature_hops < 0:
            raise ValueError(f"feature_hops must be >= 0, got {self.feature_hops}")
        beta = self.structure_beta
        if beta is not None and len(beta) != self.structure_hops:
            raise ValueError(
                f"structure_beta needs one weight per hop ({self.structure_hops}), got "
                f"{len(beta)}"
            )
        if not self.structure_mlp and self.nsf != "hop2vec":
            raise ValueError("structure_mlp=False (pure Hop2Vec, Eq. 15) needs nsf='hop2vec'")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        self._check_abar()

    def _check_abar(self) -> None:
        if self.abar_sum not in ABAR_SUMS:
            raise ValueError(f"unknown abar_sum {self.abar_sum!r}; choose from {list(ABAR_SUMS)}")
        if self.abar_support not in ABAR_SUPPORTS:
            raise ValueError(
                f"unknown abar_support {self.abar_support!r}; choose from {list(ABAR_SUPPORTS)}"
            )
        masked_only = (
            self.abar_collusion_threshold is not None
            or self.abar_ring_bits != 64
            or not self.abar_pair_masks
        )
        if self.abar_sum != "masked" and masked_only:
            raise ValueError(
                "abar_collusion_threshold / abar_ring_bits / abar_pair_masks apply to "
                "abar_sum='masked'"
            )
        m = self.abar_min_senders
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"abar_min_senders must be an int >= 1, got {m!r}")
        limit = self.abar_max_round_gib
        if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0:
            raise ValueError(f"abar_max_round_gib must be > 0 (inf: no limit), got {limit!r}")

    @property
    def hop_weights(self) -> tuple[float, ...]:
        """β_1..β_{L_s}; the paper's experiments use β_{L_s} = 1, all others 0."""
        if self.structure_beta is not None:
            return tuple(self.structure_beta)
        return (0.0,) * (self.structure_hops - 1) + (1.0,)

    @property
    def learnable_nsf(self) -> bool:
        return self.nsf == "hop2vec"

    def replace(self, **changes: Any) -> FedStructSettings:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> str:
        """These settings as JSON (a recipe argument; ``inf`` is written as ``Infinity``)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FedStructSettings:
        values = json.loads(text)
        for key in ("structure_beta", "feature_hidden", "structure_hidden"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        if values.get("edge_dp") is not None:
            values["edge_dp"] = EdgeDP(**values["edge_dp"])
        return cls(**values)

    @property
    def max_round_bytes(self) -> float | None:
        """The relay's limit on one hop's secure sums (None: no limit)."""
        limit = self.abar_max_round_gib
        return limit * 2**30 if math.isfinite(limit) else None

    @classmethod
    def resolve(
        cls, options: FedStructOptions, dataset: str, **optimisation: Any
    ) -> FedStructSettings:
        """The dataset's preset ← the options that are set ← ``optimisation`` (the
        experiment's ``lr``, ``weight_decay``, ``dropout``)."""
        changes = options.overrides()
        mechanism, eps = changes.pop("edge_dp", None), changes.pop("edge_epsilon", None)
        if (mechanism is None) != (eps is None):
            raise ValueError("edge DP needs both edge_dp (edgerand | lapgraph) and edge_epsilon")
        if mechanism is not None:
            changes["edge_dp"] = EdgeDP(mechanism, float(eps))
        return preset_for(dataset).replace(**changes, **optimisation)


def _option(help: str, choices: tuple[Any, ...] | None = None, **extra: Any) -> Any:
    """An optional field (None: the preset's value) with its CLI help."""
    return field(default=None, metadata={"help": help, "choices": choices, **extra})


@dataclass
class FedStructOptions:
    """The ``[experiment.fedstruct]`` section: FedStruct's settings the user sets. Each
    field is a :class:`FedStructSettings` field of the same name (``None``: the preset's
    value), plus ``edge_dp`` / ``edge_epsilon``, which together make its ``edge_dp``."""

    nsf: str | None = _option("node structure features", NSF_KINDS)
    nsf_dim: int | None = _option("d_s, the NSF width")
    structure_mlp: bool | None = _option("an MLP g_θs on the NSFs (off: pure Hop2Vec, Eq. 15)")
    structure_hops: int | None = _option("L_s: Ā = Â^L_s")
    structure_beta: list[float] | None = _option("β_1..β_L_s of Eq. 2 (default: one-hot at L_s)")
    prune: str | None = _option("pruning of Ā", PRUNE_CHOICES)
    prune_p: float | None = _option("p: keep about p·n entries of each Â^ℓ")
    feature_hops: int | None = _option("L: hops of the local decoupled GCN")
    feature_hidden: list[int] | None = _option("hidden sizes of the feature MLP")
    structure_hidden: list[int] | None = _option("hidden sizes of the structure MLP")
    loss_weighting: str | None = _option(
        "client weights: labelled nodes (Eq. 5) or all nodes", LOSS_WEIGHTINGS
    )
    abar: str | None = _option(
        "Ā by Algorithm 3 (federated) or by the simulator (oracle: not private)", ABAR_MODES
    )
    abar_sum: str | None = _option(
        "how client i gets Σ_k B_ik: in the clear, masked or CKKS (default: what the "
        "protocol stack's transport implies: plain, secagg/secagg+ -> masked, ckks -> ckks)",
        ABAR_SUMS,
        alias="adjacency",
    )
    abar_support: str | None = _option("public support of masked/ckks sums", ABAR_SUPPORTS)
    abar_relay: bool | None = _option("plain Ā blocks relayed by the server")
    abar_collusion_threshold: int | None = _option("masked: colluding senders tolerated")
    abar_pair_masks: bool | None = _option("masked: pairwise masks (off: receiver masks only)")
    abar_ring_bits: int | None = _option("masked: ring Z_2^64 or Z_2^32", (64, 32))
    abar_degree_bound: int | None = _option("masked Z_2^32: public bound on boundary degrees")
    abar_max_round_gib: float | None = _option("masked/ckks: refuse hops sending more (inf: off)")
    abar_min_senders: int | None = _option(
        "masked/ckks: refuse a client with fewer neighbouring clients (default 2; 1 allows "
        "one, whose block B_ik the client then learns)"
    )
    edge_dp: str | None = _option("ε-edge DP on Ā's input blocks", EDGE_DP_MECHANISMS)
    edge_epsilon: float | None = _option("ε of the edge DP (the whole graph is ε-edge-DP)")

    def overrides(self) -> dict[str, Any]:
        """The fields that are set (lists as tuples)."""
        return {
            f.name: tuple(v) if isinstance(v, list) else v
            for f in dataclasses.fields(self)
            if (v := getattr(self, f.name)) is not None
        }

    def replace(self, **changes: Any) -> FedStructOptions:
        return dataclasses.replace(self, **changes)


GENERIC = FedStructSettings()

#: Table 5 (λ = λ_s, weight decay, epochs, L, L_s, d_s, p, θ_f / θ_s hidden sizes) plus the
#: official code's dropout.
PRESETS: dict[str, FedStructSettings] = {
    "cora": FedStructSettings(
        lr=0.002, weight_decay=5e-4, epochs=40, feature_hops=2, structure_hops=10,
        feature_hidden=(64,), structure_hidden=(256,), dropout=0.75,
    ),
    "citeseer": FedStructSettings(
        lr=0.002, weight_decay=5e-4, epochs=60, feature_hops=2, structure_hops=20,
        feature_hidden=(64,), structure_hidden=(128, 64), dropout=0.7,
    ),
    "pubmed": FedStructSettings(
        lr=0.008, weight_decay=1e-3, epochs=125, feature_hops=2, structure_hops=20,
        feature_hidden=(128,), structure_hidden=(128,), dropout=0.5,
    ),
    "chameleon": FedStructSettings(
        lr=0.003, weight_decay=3e-4, epochs=60, feature_hops=1, structure_hops=1,
        feature_hidden=(64,), structure_hidden=(256,), dropout=0.7,
    ),
    "photo": FedStructSettings(
        lr=0.005, weight_decay=1e-3, epochs=150, feature_hops=1, structure_hops=3,
        feature_hidden=(256,), structure_hidden=(256,), dropout=0.8,
    ),
    "amazon-ratings": FedStructSettings(
        lr=0.002, weight_decay=2e-4, epochs=70, feature_hops=2, structure_hops=5,
        feature_hidden=(64,), structure_hidden=(256,), dropout=0.7,
    ),
}  # fmt: skip

_ALIASES = {"amazonratings": "amazon-ratings", "ratings": "amazon-ratings"}


def _key(dataset: str) -> str:
    try:
        return resolve_name(dataset)
    except ValueError:
        key = "".join(ch for ch in str(dataset).lower() if ch not in "-_ ")
        return _ALIASES.get(key, key)


def preset_for(dataset: str) -> FedStructSettings:
    """Table 5's settings for ``dataset`` (any alias), else :data:`GENERIC`."""
    return PRESETS.get(_key(dataset), GENERIC)


def apply_preset(config: Any, dataset: str | None = None) -> Any:
    """A copy of ``config`` with the preset's lr, weight decay, dropout and epochs (rounds)."""
    preset = preset_for(dataset or config.dataset)
    return dataclasses.replace(
        config,
        lr=preset.lr,
        weight_decay=preset.weight_decay,
        dropout=preset.dropout,
        rounds=preset.epochs,
    )

"""FedStruct settings and the paper's hyper-parameters (Aliakbari et al., Table 5).

:class:`FedStructSettings` holds everything FedStruct needs beyond the generic experiment
configuration. :func:`preset_for` returns Table 5's values for a dataset (dropout is the
official code's, the paper gives none; seed_fedstruct.md §3.1, §9); datasets without a
row (e.g. the generated ``csbm``) get :data:`GENERIC`.

Table 5's "θ_f / θ_s layers" list full MLP sizes ``[in, hidden…, classes]``; only the
hidden sizes are stored (input and output sizes come from the data). Table 5 gives
λ_s = λ for every dataset, so S and θ share one Adam optimiser (as in the official code).

:meth:`FedStructSettings.from_config` takes the dataset preset, overrides it with the
FedStruct fields of an ``ExperimentConfig`` that are set (see ``CONFIG_FIELDS``; read with
``getattr`` so a config without them works) and takes the *optimisation* settings
``lr``, ``weight_decay`` and ``dropout`` from the config, like every other algorithm.
:func:`apply_preset` writes a preset's optimisation settings and epochs (= ``rounds``)
into a config, for a faithful Table 5 run (the runner's ``rounds`` drives training;
``epochs`` is only the preset's value for it).

Pruning (seed_fedstruct.md §8.3): ``prune="receiver"`` (default) keeps the top ``⌈p·n_i⌉``
values of each client's ``[Â^[i]]^ℓ`` after every hop, the per-client analogue of the
official code's global top-``p·n`` rule; ``"sender"`` is Alg. 3's Eq. 37 (top
``⌈p/K⌉·n_i`` of every block sent); ``"none"`` is the paper's "-F". With ``abar="oracle"``
any value but ``"none"`` means the official code's global rule (``adjacency.central_abar``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from securefgl.fedstruct.edge_dp import EdgeDP
from securefgl.fedstruct.nsf import NSF_KINDS

__all__ = [
    "CONFIG_FIELDS",
    "GENERIC",
    "PRESETS",
    "FedStructSettings",
    "apply_preset",
    "preset_for",
]

ABAR_MODES = ("federated", "oracle")
PRUNE_CHOICES = ("none", "sender", "receiver")
LOSS_WEIGHTINGS = ("labelled", "nodes")


@dataclass(frozen=True)
class FedStructSettings:
    """FedStruct's hyper-parameters (defaults: a generic setting, see :data:`GENERIC`)."""

    nsf: str = "hop2vec"  # degree | fedstar | random | hop2vec (NSF_KINDS)
    nsf_dim: int = 256  # d_s
    structure_mlp: bool = True  # False: pure Hop2Vec (Eq. 15), S ∈ R^{n×c}, no g_θs
    structure_hops: int = 5  # L_s: Ā = Â^{L_s} (β_{L_s} = 1)
    beta: tuple[float, ...] | None = None  # β_1..β_{L_s} of Eq. 2; None = one-hot at L_s
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
        if self.beta is not None and len(self.beta) != self.structure_hops:
            raise ValueError(
                f"beta needs one weight per hop ({self.structure_hops}), got {len(self.beta)}"
            )
        if not self.structure_mlp and self.nsf != "hop2vec":
            raise ValueError("structure_mlp=False (pure Hop2Vec, Eq. 15) needs nsf='hop2vec'")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")

    @property
    def hop_weights(self) -> tuple[float, ...]:
        """β_1..β_{L_s}; the paper's experiments use β_{L_s} = 1, all others 0."""
        if self.beta is not None:
            return tuple(self.beta)
        return (0.0,) * (self.structure_hops - 1) + (1.0,)

    @property
    def learnable_nsf(self) -> bool:
        return self.nsf == "hop2vec"

    def replace(self, **changes: Any) -> FedStructSettings:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_config(cls, config: Any) -> FedStructSettings:
        """Dataset preset ← FedStruct fields set in ``config`` ← its lr / weight decay /
        dropout (see module docstring)."""
        base = preset_for(getattr(config, "dataset", "csbm"))
        changes: dict[str, Any] = {}
        for cfg_name, name in CONFIG_FIELDS.items():
            value = getattr(config, cfg_name, None)
            if value is not None:
                changes[name] = tuple(value) if isinstance(value, list) else value
        for name in ("lr", "weight_decay", "dropout"):
            if (value := getattr(config, name, None)) is not None:
                changes[name] = value
        mechanism, eps = getattr(config, "edge_dp", None), getattr(config, "edge_epsilon", None)
        if (mechanism is None) != (eps is None):
            raise ValueError("edge DP needs both edge_dp (edgerand | lapgraph) and edge_epsilon")
        if mechanism is not None:
            changes["edge_dp"] = EdgeDP(mechanism, float(eps))
        return base.replace(**changes)


#: ExperimentConfig field -> FedStructSettings field (None in the config = preset value).
CONFIG_FIELDS: dict[str, str] = {
    "nsf": "nsf",
    "nsf_dim": "nsf_dim",
    "structure_mlp": "structure_mlp",
    "structure_hops": "structure_hops",
    "structure_beta": "beta",
    "prune": "prune",
    "prune_p": "prune_p",
    "feature_hops": "feature_hops",
    "feature_hidden": "feature_hidden",
    "structure_hidden": "structure_hidden",
    "loss_weighting": "loss_weighting",
    "abar": "abar",
    "abar_sum": "abar_sum",
    "abar_support": "abar_support",
    "abar_relay": "abar_relay",
    "abar_collusion_threshold": "abar_collusion_threshold",
    "abar_pair_masks": "abar_pair_masks",
    "abar_ring_bits": "abar_ring_bits",
    "abar_degree_bound": "abar_degree_bound",
    "abar_max_round_gib": "abar_max_round_gib",
}

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
        from securefgl.data.datasets import resolve_name

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

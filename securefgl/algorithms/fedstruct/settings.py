"""FedStruct's settings: one dataclass for the user's section and the run's settings, and
the paper's presets.

FedStruct (Aliakbari et al., ICLR 2025). :class:`FedStructSettings` is the
``[experiment.fedstruct]`` section of a configuration; the fields Table 5 sets per dataset
(L, L_s and the hidden sizes) default to ``None``: the dataset's preset (:func:`preset_for`,
plus the official code's dropout, which the paper does not give; datasets without a row get
:data:`GENERIC`). :meth:`FedStructSettings.resolve` fills them in and takes the optimisation
settings (``lr``, ``weight_decay``, ``dropout``) from the experiment, like every other
algorithm; :func:`apply_preset` writes a preset's optimisation settings and epochs into an
experiment for a faithful Table 5 run.

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
from typing import TYPE_CHECKING, Any

from protocols.names import SECURE_SUM_NAMES as SECURE_SUMS
from securefgl.data.catalog import resolve_name

if TYPE_CHECKING:
    import numpy as np
    import scipy.sparse as sp

__all__ = [
    "GENERIC",
    "NSF_KINDS",
    "PRESETS",
    "EdgeDP",
    "FedStructSettings",
    "apply_preset",
    "preset_for",
]

NSF_KINDS = ("degree", "fedstar", "random", "hop2vec")
EDGE_DP_MECHANISMS = ("edgerand", "lapgraph")
ABAR_SUMS = tuple(SECURE_SUMS)
ABAR_SUPPORTS = ("rows", "union")
ABAR_MODES = ("federated", "oracle")
PRUNE_CHOICES = ("none", "sender", "receiver")
LOSS_WEIGHTINGS = ("labelled", "nodes")
STRUCTURE_GRADS = ("nsf", "output")


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
        from protocols.dp.graph_dp import edge_rand, lap_graph

        if self.mechanism == "lapgraph":
            return lap_graph(block, self.epsilon, symmetric=symmetric, rng=rng)
        return edge_rand(block, self.epsilon, symmetric=symmetric, preserve_sparsity=True, rng=rng)


def _option(default: Any, help: str, choices: tuple[Any, ...] | None = None, **extra: Any) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices, **extra})


def _derived(default: Any = None) -> Any:
    """A value the experiment or the preset gives (not a ``[fedstruct]`` key)."""
    return field(default=default, metadata={"internal": True})


#: the fields Table 5 sets per dataset (None in the section: the dataset's preset)
PRESET_FIELDS = ("feature_hops", "structure_hops", "feature_hidden", "structure_hidden")


@dataclass(frozen=True)
class FedStructSettings:
    """FedStruct's hyper-parameters: the ``[experiment.fedstruct]`` section as the user
    gives it, and (:meth:`resolve`) as a run uses it, with the dataset's Table 5 values for
    the fields left unset, the experiment's lr / weight decay / dropout and the secure-sum
    mode its transport implies."""

    nsf: str = _option("hop2vec", "node structure features", NSF_KINDS)
    nsf_dim: int = _option(256, "d_s, the NSF width")
    structure_mlp: bool = _option(True, "an MLP g_θs on the NSFs (off: pure Hop2Vec, Eq. 15)")
    structure_hops: int | None = _option(None, "L_s: Ā = Â^L_s (default: the dataset's preset)")
    structure_beta: tuple[float, ...] | None = _option(
        None, "β_1..β_L_s of Eq. 2 (default: one-hot at L_s)"
    )
    prune: str = _option("receiver", "pruning of Ā", PRUNE_CHOICES)
    prune_p: float = _option(30, "p: keep about p·n entries of each Â^ℓ")
    feature_hops: int | None = _option(
        None, "L: hops of the local decoupled GCN (default: the dataset's preset)"
    )
    feature_hidden: tuple[int, ...] | None = _option(None, "hidden sizes of the feature MLP")
    structure_hidden: tuple[int, ...] | None = _option(None, "hidden sizes of the structure MLP")
    loss_weighting: str = _option(
        "labelled", "client weights: labelled nodes (Eq. 5) or all nodes", LOSS_WEIGHTINGS
    )
    structure_grads: str = _option(
        "nsf",
        "structure gradient uploaded: w.r.t. θ_s and S (Prop. 2), or w.r.t. g_θs(S), n×c, "
        "expanded after aggregation (output_grads; shared structure dropout masks)",
        STRUCTURE_GRADS,
    )
    abar: str = _option(
        "federated", "Ā by Algorithm 3 (federated) or by the simulator (oracle: not private)",
        ABAR_MODES,
    )  # fmt: skip
    sum_mode: str | None = _option(
        None,
        "how client i gets Σ_k B_ik: in the clear, masked or CKKS (default: what the "
        "protocol stack's transport implies: plain, secagg/secagg+ -> masked, ckks -> ckks)",
        ABAR_SUMS,
    )
    abar_support: str = _option("rows", "public support of masked/ckks sums", ABAR_SUPPORTS)
    abar_relay: bool = _option(False, "plain Ā blocks relayed by the server")
    abar_collusion_threshold: int | None = _option(
        None, "masked: colluding senders tolerated (default: mask every sender pair)"
    )
    abar_pair_masks: bool = _option(True, "masked: pairwise masks (off: receiver masks only)")
    abar_ring_bits: int = _option(64, "masked: ring Z_2^64 or Z_2^32", (64, 32))
    abar_degree_bound: int = _option(2047, "masked Z_2^32: public bound on boundary degrees")
    abar_max_round_gib: float = _option(4.0, "masked/ckks: refuse hops sending more (inf: off)")
    abar_min_senders: int = _option(
        2, "masked/ckks: refuse a client with fewer neighbouring clients (1 allows one, whose "
        "block B_ik the client then learns)",
    )  # fmt: skip
    edge_dp: str | None = _option(None, "ε-edge DP on Ā's input blocks", EDGE_DP_MECHANISMS)
    edge_epsilon: float | None = _option(None, "ε of the edge DP (the whole graph is ε-edge-DP)")
    # derived: the experiment's optimisation settings and the preset's epochs
    lr: float | None = _derived()  # λ = λ_s (Adam)
    weight_decay: float | None = _derived()
    dropout: float | None = _derived()
    epochs: int | None = _derived()  # FL rounds of the paper's runs (Table 5)
    rw_steps: int = _derived(50)  # fedstar: random-walk diagonals (official code)
    init_std: float = _derived(0.05)  # hop2vec: N(0, init_std²) (official code)

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
            value = getattr(self, key)
            if value is not None and int(value) < 1:
                raise ValueError(f"{key} must be >= 1, got {value}")
        if self.nsf == "fedstar" and self.nsf_dim < 2:
            raise ValueError(f"nsf = 'fedstar' needs nsf_dim >= 2 (random-walk steps and "
                             f"degrees), got {self.nsf_dim}")  # fmt: skip
        if self.feature_hops is not None and self.feature_hops < 0:
            raise ValueError(f"feature_hops must be >= 0, got {self.feature_hops}")
        beta, hops = self.structure_beta, self.structure_hops
        if beta is not None and hops is not None and len(beta) != hops:
            raise ValueError(f"structure_beta needs one weight per hop ({hops}), got {len(beta)}")
        if self.structure_grads not in STRUCTURE_GRADS:
            raise ValueError(
                f"unknown structure_grads {self.structure_grads!r}; "
                f"choose from {list(STRUCTURE_GRADS)}"
            )
        if self.structure_grads == "output" and not self.structure_mlp:
            raise ValueError(
                "structure_grads='output' needs the structure MLP (pure Hop2Vec already "
                "uploads ∇S = ∇g(S))"
            )
        if not self.structure_mlp and self.nsf != "hop2vec":
            raise ValueError("structure_mlp=False (pure Hop2Vec, Eq. 15) needs nsf='hop2vec'")
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        if (self.edge_dp is None) != (self.edge_epsilon is None):
            raise ValueError("edge DP needs both edge_dp (edgerand | lapgraph) and edge_epsilon")
        if self.edge_dp is not None:
            EdgeDP(self.edge_dp, float(self.edge_epsilon or 0.0))  # checks both
        self._check_abar()

    def _check_abar(self) -> None:
        if self.sum_mode is not None and self.sum_mode not in ABAR_SUMS:
            raise ValueError(f"unknown sum_mode {self.sum_mode!r}; choose from {list(ABAR_SUMS)}")
        if self.abar_support not in ABAR_SUPPORTS:
            raise ValueError(
                f"unknown abar_support {self.abar_support!r}; choose from {list(ABAR_SUPPORTS)}"
            )
        masked_only = (
            self.abar_collusion_threshold is not None
            or self.abar_ring_bits != 64
            or not self.abar_pair_masks
        )
        if self.sum_mode not in (None, "masked") and masked_only:
            raise ValueError(
                "abar_collusion_threshold / abar_ring_bits / abar_pair_masks apply to "
                "sum_mode='masked'"
            )
        bound = self.abar_degree_bound
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise ValueError(f"abar_degree_bound must be an int >= 1, got {bound!r}")
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
        return (0.0,) * (int(self.structure_hops or 1) - 1) + (1.0,)

    @property
    def learnable_nsf(self) -> bool:
        return self.nsf == "hop2vec"

    @property
    def edge_privacy(self) -> EdgeDP | None:
        """The edge-DP mechanism and budget, if set."""
        if self.edge_dp is None or self.edge_epsilon is None:
            return None
        return EdgeDP(self.edge_dp, float(self.edge_epsilon))

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
        return cls(**values)

    @property
    def max_round_bytes(self) -> float | None:
        """The relay's limit on one hop's secure sums (None: no limit)."""
        limit = self.abar_max_round_gib
        return limit * 2**30 if math.isfinite(limit) else None

    def resolve(self, config: Any) -> FedStructSettings:
        """The settings a run of ``config`` uses: every field left unset (None) takes the
        dataset's Table 5 value, the experiment's ``lr`` / ``weight_decay`` / ``dropout``, or
        the secure-sum mode that the transport implies."""
        preset = preset_for(config.dataset)
        given = {
            **{key: getattr(preset, key) for key in (*PRESET_FIELDS, "epochs")},
            "lr": config.lr, "weight_decay": config.weight_decay, "dropout": config.dropout,
            "sum_mode": config.protocol.secure_sum_mode(),
        }  # fmt: skip
        return self.replace(**{k: v for k, v in given.items() if getattr(self, k) is None})

    def check(self, config: Any) -> None:
        """The section resolves for ``config`` and its secure sums have at least two
        clients to sum over (run when the configuration is built)."""
        mode = self.resolve(config).sum_mode
        if "fedstruct" in config.algorithms and mode != "plain" and config.clients < 2:
            raise ValueError(
                f"sum_mode = {mode!r} needs at least 2 clients (a secure sum over one client "
                "is that client's own value): raise clients, or use sum_mode = 'plain'"
            )

    @classmethod
    def of(cls, config: Any) -> FedStructSettings:
        """FedStruct's settings as ``config`` runs them (:meth:`resolve` of its section)."""
        return config.section(cls).resolve(config)


#: the preset of a dataset without a Table 5 row
GENERIC = FedStructSettings(
    lr=0.005, weight_decay=5e-4, epochs=50, feature_hops=2, structure_hops=5,
    feature_hidden=(64,), structure_hidden=(256,), dropout=0.5,
)  # fmt: skip

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
    return config.replace(
        lr=preset.lr, weight_decay=preset.weight_decay, dropout=preset.dropout,
        rounds=preset.epochs,
    )  # fmt: skip

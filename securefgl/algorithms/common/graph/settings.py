"""Graph-classification settings: the ``[experiment.graph]`` section (``--graph-*`` flags).

Defaults are GPFL's (TMLR 2025, §4.1 and its code's ``main.py``): Dirichlet label skew with
priors capped at 0.95, 5 stratified folds per client (fold 0 tested), a 3-layer GIN of
width 64 with dropout 0.5, Adam (lr 1e-3, weight decay 5e-4, its state kept across rounds),
batches of 128 graphs; GCFL+'s (ε1, ε2) per dataset and FedStar's 16 + 16 structure
encodings as in that code. The generic ``rounds`` / ``local_epochs`` / ``mu`` / ``clients``
/ ``seeds`` apply to both tasks (the paper: 200 rounds, 1 local epoch, μ = 0.01).

FedVN's backbone (AAAI 2025, §5.1 and its code) is ``model = "gin-bn"`` (GIN layers with
batch norm, mean pooling) trained by plain SGD (``optimizer = "sgd"``), evaluated in batches
of ``eval_batch_size`` graphs (its batch norm uses each batch's statistics);
:data:`FEDVN_SETUP` holds that set-up. GOOD-Motif's generator options: ``motif``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

#: GCFL+'s (ε1, ε2) per dataset in GPFL's code (``data_utils.gcfl_param``); others: its
#: command-line defaults.
GCFL_EPS = {"nci1": (0.1, 0.21), "proteins": (0.03, 0.06), "imdb-binary": (0.025, 0.045)}
GCFL_DEFAULT_EPS = (0.01, 0.1)
MODELS = ("gin", "gin-bn")
OPTIMIZERS = ("adam", "sgd")
#: FedVN's set-up (AAAI 2025, §5.1; its code's defaults): GIN-BN of width 100, plain SGD
#: (lr 10⁻³, no weight decay), batches of 32 graphs, evaluation in batches of 32
FEDVN_SETUP: dict[str, Any] = {
    "model": "gin-bn", "hidden": 100, "layers": 3, "dropout": 0.5, "optimizer": "sgd",
    "lr": 1e-3, "weight_decay": 0.0, "batch_size": 32, "eval_batch_size": 32,
}  # fmt: skip


def _f(default: Any, help: str, **extra: Any) -> Any:
    meta = {"help": help, **extra}
    if isinstance(default, dict | list):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class GraphTaskSettings:
    """How graphs are dealt to clients and how each client's GIN is trained."""

    dirichlet: float = _f(1.0, "Dirichlet α of the clients' label priors", unprefixed=True)
    prior_cap: float = _f(0.95, "cap on one class's prior (excess spread over the others)")
    folds: int = _f(5, "stratified folds inside each client")
    test_fold: int = _f(0, "the fold each client tests on (the others train)")
    split_stream: str = _f("ours", "the split's random streams: ours, or authors (GPFL's "
                           "code's draws replayed: a seed gives the code's split)")  # fmt: skip
    split_seed: int | None = _f(None, "draw the split from this seed, not the run's (a fixed "
                                "split under varying training seeds)")  # fmt: skip
    batch_size: int = _f(128, "graphs per mini-batch")
    eval_batch_size: int | None = _f(None, "evaluate in batches of this many graphs, in "
                                     "order (unset: all at once)")  # fmt: skip
    model: str = _f("gin", "gin (GPFL's: sum pooling, no batch norm) or gin-bn (FedVN's: "
                    "batch norm on batch statistics, mean pooling)", choices=MODELS)  # fmt: skip
    optimizer: str = _f("adam", "each client's optimizer (adam: state kept across rounds; "
                        "sgd: plain)", choices=OPTIMIZERS)  # fmt: skip
    layers: int = _f(3, "GIN layers")
    hidden: int = _f(64, "GIN width")
    dropout: float = _f(0.5, "GIN dropout")
    lr: float = _f(1e-3, "each client's Adam lr (its state kept across rounds)")
    weight_decay: float = _f(5e-4, "each client's Adam weight decay")
    best_of_last: int = _f(10, "the reported best-of-last metric looks at this many rounds")
    gcfl_eps1: float | None = _f(None, "GCFL+ ε1 (default: per dataset, GPFL's code)",
                                 readers=("gcfl",))
    gcfl_eps2: float | None = _f(None, "GCFL+ ε2 (default: per dataset, GPFL's code)",
                                 readers=("gcfl",))
    gcfl_seq_length: int = _f(10, "GCFL+ length of the update-norm sequences (DTW)",
                              readers=("gcfl",))
    fedstar_rw: int = _f(16, "FedStar random-walk structure encoding size", readers=("fedstar",))
    fedstar_dg: int = _f(16, "FedStar degree structure encoding size", readers=("fedstar",))
    synthetic: dict[str, Any] = _f({}, "synthetic-graphs generator options (JSON)")
    motif: dict[str, Any] = _f({}, "GOOD-Motif generator options (JSON: graphs_per_domain, "
                               "val_per_domain, seed)")  # fmt: skip
    ditto_lambda: float = _f(1.0, "Ditto's λ: the personal model's pull to the global one",
                             readers=("ditto",))

    def __post_init__(self) -> None:
        if not self.dirichlet > 0:
            raise ValueError(f"dirichlet must be > 0, got {self.dirichlet}")
        if not 0 < self.prior_cap <= 1:
            raise ValueError(f"prior_cap must lie in (0, 1], got {self.prior_cap}")
        from securefgl.data.graph_views import SPLIT_STREAMS

        if self.split_stream not in SPLIT_STREAMS:
            raise ValueError(f"split_stream must be one of {SPLIT_STREAMS}, got "
                             f"{self.split_stream!r}")  # fmt: skip
        if self.split_seed is not None and not 0 <= self.split_seed < 2**32:
            raise ValueError(f"split_seed must be None or in [0, 2**32), got {self.split_seed}")
        if self.folds < 2 or not 0 <= self.test_fold < self.folds:
            raise ValueError(f"need folds ≥ 2 and 0 ≤ test_fold < folds, got {self.folds}, "
                             f"{self.test_fold}")  # fmt: skip
        for key in ("batch_size", "layers", "hidden", "best_of_last", "gcfl_seq_length"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be ≥ 1, got {getattr(self, key)}")
        if self.fedstar_rw < 1 or self.fedstar_dg < 1:
            raise ValueError("fedstar_rw and fedstar_dg must be ≥ 1")
        if not 0 <= self.dropout < 1 or self.lr <= 0 or self.weight_decay < 0:
            raise ValueError("need 0 ≤ dropout < 1, lr > 0, weight_decay ≥ 0")
        if self.model not in MODELS or self.optimizer not in OPTIMIZERS:
            raise ValueError(f"model must be one of {MODELS}, optimizer one of {OPTIMIZERS}")
        if self.eval_batch_size is not None and self.eval_batch_size < 2:
            raise ValueError(f"eval_batch_size must be unset or ≥ 2, got {self.eval_batch_size}")
        if self.ditto_lambda < 0:
            raise ValueError(f"ditto_lambda must be ≥ 0, got {self.ditto_lambda}")
        for key in ("gcfl_eps1", "gcfl_eps2"):
            value = getattr(self, key)
            if value is not None and not value >= 0:
                raise ValueError(f"{key} must be unset or ≥ 0, got {value}")
        from securefgl.data.good_motif import check_motif_options
        from securefgl.data.graph_datasets import check_synthetic_options

        check_synthetic_options(self.synthetic)
        check_motif_options(self.motif)

    def gcfl_eps(self, dataset: str) -> tuple[float, float]:
        """GCFL+'s (ε1, ε2): the section's values, else GPFL's per-dataset values."""
        e1, e2 = GCFL_EPS.get(dataset.lower(), GCFL_DEFAULT_EPS)
        return (
            e1 if self.gcfl_eps1 is None else self.gcfl_eps1,
            e2 if self.gcfl_eps2 is None else self.gcfl_eps2,
        )

    def replace(self, **changes: Any) -> GraphTaskSettings:
        return dataclasses.replace(self, **changes)

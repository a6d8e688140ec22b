"""SpreadFGL / FedGL settings: the ``[experiment.spreadfgl]`` section (CLI ``--spreadfgl-*``).

The paper (Zhong et al.) leaves the graphic patcher, the AE's output activation, the noise
input, the GAN loss numerics, the candidate scope and K / k / T_l of Table II unspecified
(§III-C, §III-D, §IV-A); each such choice is a field here, with the default named in
``securefgl/algorithms/spreadfgl/README.md``. The edge-server count and their topology are generic
(``edge_servers``, ``server_topology``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

CANDIDATES = ("all", "cross_client", "own_client")
LOCAL_LINKS = ("virtual", "edge")
REFRESH = ("replace", "accumulate")
GENERATED_SCALES = ("none", "own-norm", "zero")
FEATURE_ACTS = ("none", "sigmoid")
NOISE_INPUT = ("fixed", "resampled")
GAN_LOSSES = ("bce", "paper")
REDUCTIONS = ("sum", "mean")
H_MECHANISMS = ("none", "gaussian", "rr")
PATCH_ENCODINGS = ("auto", "rows", "factored")


def _f(default: Any, help: str, choices: tuple[str, ...] | None = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class SpreadFGLSettings:
    """Every knob of SpreadFGL / FedGL (and of their baselines FedAvg-fusion, LocalFGL)."""

    interval: int = _f(5, "K: H upload, imputation and Eq. 16 every K rounds")
    local_steps: int = _f(10, "T_l: local Adam steps per edge-client round")
    top_k: int = _f(5, "k: potential neighbours per node from H·Hᵀ")
    aggregator: str = _f("gcn", "gcn: GraphSAGE-GCN (paper); sage: Eq. 3's concatenation",
                         ("gcn", "sage"))  # fmt: skip
    candidates: str = _f("all", "potential neighbours among all of the server's nodes, only "
                         "other clients' (§III-C) or only the row's own client's (§III-D's "
                         "literal ∀u,v ∈ V^{ji})", CANDIDATES)  # fmt: skip
    local_links: str = _f("virtual", "a potential neighbour on the same client: a virtual "
                          "node (generated features) or the real edge (§III-D)",
                          LOCAL_LINKS)  # fmt: skip
    dedup: bool = _f(True, "one generated row per distinct potential neighbour (§III-D)")
    refresh: str = _f("replace", "each imputation replaces or adds to the virtual nodes",
                      REFRESH)  # fmt: skip
    patch_encoding: str = _f("auto", "generated rows sent as d-dim rows or factored Z·Wₑ + bₑ "
                             "(exact for a linear encoder output; auto: factored when "
                             "feature_act = none)", PATCH_ENCODINGS)  # fmt: skip
    generated_scale: str = _f("none", "none: generated rows as received; own-norm: the client "
                              "rescales each to the mean L2 norm of its own rows (its patcher); "
                              "zero: all-zero rows, virtual nodes as featureless hubs (a "
                              "diagnostic)", GENERATED_SCALES)  # fmt: skip
    feature_act: str = _f("none", "activation of the encoder output X̄ = f(S) (Eq. 10)",
                          FEATURE_ACTS)  # fmt: skip
    noise_input: str = _f("fixed", "the AE input S: drawn once per server or every step",
                          NOISE_INPUT)  # fmt: skip
    negative_sampling: bool = _f(True, "Eq. 13-14's mask e_u = 1[h_u > 1/c] (off: e_u = 1)")
    assessor: bool = _f(True, "adversarial assessor (off: full-vector L2 reconstruction)")
    gan_loss: str = _f("bce", "bce: BCE forms of Eq. 13-14; paper: the log forms, clamped",
                       GAN_LOSSES)  # fmt: skip
    ae_iterations: int = _f(30, "outer AE/assessor iterations per imputation (warm start)")
    ae_steps: int = _f(5, "T_ae: AE steps per outer iteration")
    as_steps: int = _f(3, "T_as: assessor steps per outer iteration")
    ae_lr: float = _f(0.001, "Adam lr of the AE and the assessor")
    ae_batch: int = _f(2048, "rows per AE / assessor step (mini-batches of the server's nodes)")
    trace_weight: float | None = _f(
        None, "λ of Eq. 15's Tr(W_L W_Lᵀ) (default: 1 for spreadfgl, 0 for fedgl and the "
        "baselines, whose loss is Eq. 7)"
    )  # fmt: skip
    loss_reduction: str = _f("sum", "Eq. 7 / 15 as written (cross-entropy summed) or divided "
                             "by the number of labelled nodes (mean cross-entropy; Eq. 15's "
                             "trace term divided alike)", REDUCTIONS)  # fmt: skip
    h_mechanism: str = _f("none", "protection of the uploaded H: none, gaussian (row clip + "
                          "Gaussian noise) or rr (randomised response on the top class)",
                          H_MECHANISMS)  # fmt: skip
    h_noise: float = _f(1.0, "gaussian: noise multiplier σ (std σ·2C)")
    h_clip: float = _f(1.0, "gaussian: L2 clip C of each row")
    h_epsilon: float = _f(1.0, "rr: ε per row and upload")
    h_rows: float = _f(1.0, "fraction of each client's rows it ever uploads (a secret random "
                       "subset drawn once; the others are never sent)")  # fmt: skip

    def __post_init__(self) -> None:
        for name, allowed in (
            ("aggregator", ("gcn", "sage")), ("candidates", CANDIDATES),
            ("local_links", LOCAL_LINKS), ("refresh", REFRESH), ("feature_act", FEATURE_ACTS),
            ("generated_scale", GENERATED_SCALES),
            ("noise_input", NOISE_INPUT), ("gan_loss", GAN_LOSSES),
            ("loss_reduction", REDUCTIONS), ("h_mechanism", H_MECHANISMS),
            ("patch_encoding", PATCH_ENCODINGS),
        ):  # fmt: skip
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {list(allowed)}, got {getattr(self, name)!r}"
                )
        for name in ("interval", "local_steps", "top_k", "ae_steps", "as_steps", "ae_batch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if isinstance(self.ae_iterations, bool) or self.ae_iterations < 0:
            raise ValueError(f"ae_iterations must be >= 0, got {self.ae_iterations!r}")
        positive = {"ae_lr": self.ae_lr, "h_noise": self.h_noise, "h_clip": self.h_clip,
                    "h_epsilon": self.h_epsilon}  # fmt: skip
        for name, value in positive.items():
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and > 0, got {value!r}")
        if self.trace_weight is not None and not self.trace_weight >= 0:
            raise ValueError(f"trace_weight must be >= 0, got {self.trace_weight!r}")
        if not 0 < self.h_rows <= 1:
            raise ValueError(f"h_rows must lie in (0, 1], got {self.h_rows!r}")
        if self.patch_encoding == "factored" and self.feature_act != "none":
            raise ValueError("patch_encoding = 'factored' needs feature_act = 'none'")

    @property
    def factored(self) -> bool:
        """Generated rows travel as ``Z, Wₑ, bₑ``."""
        return self.patch_encoding == "factored" or (
            self.patch_encoding == "auto" and self.feature_act == "none"
        )

    def replace(self, **changes: Any) -> SpreadFGLSettings:
        return dataclasses.replace(self, **changes)

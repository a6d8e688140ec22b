"""FedSage+ settings: the ``[experiment.fedsage]`` section (CLI ``--fedsage-*``).

Defaults follow the official code's configuration (Zhang et al., NeurIPS 2021:
``num_pred = 5``, latent 128, encoder hidden 32, fGen 256 → 2048, 20 epochs of NeighGen and
20 of federated fGen training, Adam lr 0.001, weight decay 1e-4, loss weights 1, hidden half
of the nodes outside the train and test sets).

Protection of the answered gradients: ``cross_clip`` / ``cross_noise`` (each answer clipped
and noised, no ε); ``cross_sum`` (a secure-sum mode: client i receives only the sum over
the other clients of their answers to one common query, relayed by the server, which sees
no answer) with optional ``cross_sum_noise`` σ: Gaussian noise of std σ·Δ on that sum
(Δ = 2·cross_clip·√rows, one node of one client changing every answered row), each of the
n answering clients adding its 1/n share of the variance; ε (RDP over the federated fGen
epochs, node level, against client i) is reported.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from protocols.names import SECURE_SUM_NAMES as SECURE_SUMS


def _f(default: Any, help: str) -> Any:
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class FedSageSettings:
    hide_fraction: float = _f(0.5, "share of the nodes outside train and test hidden to train "
                              "NeighGen (the impaired graph)")  # fmt: skip
    num_pred: int = _f(5, "at most this many generated neighbours per node")
    latent: int = _f(128, "NeighGen encoder output size")
    encoder_hidden: int = _f(32, "NeighGen encoder hidden size")
    gen_hidden: list[int] = _f([256, 2048], "fGen hidden sizes")
    gen_epochs: int = _f(20, "local NeighGen epochs (LocSage+)")
    fed_gen_epochs: int = _f(20, "federated fGen epochs with the cross-client loss")
    gen_lr: float = _f(0.001, "Adam lr of NeighGen")
    gen_weight_decay: float = _f(1e-4, "Adam weight decay of NeighGen")
    lambda_d: float = _f(1.0, "weight of dGen's smooth-L1 degree loss")
    lambda_f: float = _f(1.0, "weight of fGen's greedy feature loss")
    lambda_c: float = _f(1.0, "weight of the classifier loss on the mended impaired graph")
    cross_weight: float = _f(1.0, "α: weight of each other client's feature-matching loss")
    cross_queries: int = _f(16, "nodes whose generated neighbours go to each other client "
                            "per federated epoch")  # fmt: skip
    cross_clip: float = _f(0.0, "answering client: clip each returned gradient row to this "
                           "L2 norm (0: off)")  # fmt: skip
    cross_noise: float = _f(0.0, "answering client: Gaussian noise std, times cross_clip, on "
                            "each returned row (0: off; a heuristic defence, no ε)")  # fmt: skip
    cross_sum: str | None = _f(None, "client i receives only the sum of the other clients' "
                               "answers, as this secure sum (masked, ckks, ...; None: each "
                               "answer in the clear, the paper)")  # fmt: skip
    cross_sum_noise: float = _f(0.0, "σ: Gaussian noise σ·2·cross_clip·√rows on that sum, "
                                "shared by the answering clients (0: off; accounted)")  # fmt: skip
    cross_delta: float = _f(1e-5, "δ at which the answers' ε is reported")
    local_steps: int = _f(10, "classifier: local Adam steps per round")

    def __post_init__(self) -> None:
        if not 0 <= self.hide_fraction < 1:
            raise ValueError(f"hide_fraction must lie in [0, 1), got {self.hide_fraction!r}")
        ints = ("num_pred", "latent", "encoder_hidden", "cross_queries", "local_steps")
        for name in ints:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("gen_epochs", "fed_gen_epochs"):
            if isinstance(getattr(self, name), bool) or getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not self.gen_hidden or any(h < 1 for h in self.gen_hidden):
            raise ValueError(f"gen_hidden must be positive sizes, got {self.gen_hidden!r}")
        for name in ("gen_lr",):
            if not (getattr(self, name) > 0 and math.isfinite(getattr(self, name))):
                raise ValueError(f"{name} must be finite and > 0")
        nonneg = ("gen_weight_decay", "lambda_d", "lambda_f", "lambda_c", "cross_weight",
                  "cross_clip", "cross_noise")  # fmt: skip
        for name in nonneg:
            if not (getattr(self, name) >= 0 and math.isfinite(getattr(self, name))):
                raise ValueError(f"{name} must be finite and >= 0, got {getattr(self, name)!r}")
        if self.cross_sum is not None and self.cross_sum not in SECURE_SUMS:
            raise ValueError(f"cross_sum must be one of {sorted(SECURE_SUMS)}, got "
                             f"{self.cross_sum!r}")  # fmt: skip
        if not (self.cross_sum_noise >= 0 and math.isfinite(self.cross_sum_noise)):
            raise ValueError("cross_sum_noise must be finite and >= 0")
        if self.cross_sum_noise > 0 and (self.cross_sum is None or self.cross_clip == 0):
            raise ValueError("cross_sum_noise needs cross_sum and cross_clip > 0")
        if self.cross_sum is not None and self.cross_noise > 0:
            raise ValueError("with cross_sum, noise the sum (cross_sum_noise), not each answer")
        if not 0 < self.cross_delta < 1:
            raise ValueError("cross_delta must lie in (0, 1)")
        if self.cross_noise > 0 and self.cross_clip == 0:
            raise ValueError("cross_noise needs cross_clip > 0 (the noise scale is σ·C)")

    def replace(self, **changes: Any) -> FedSageSettings:
        return dataclasses.replace(self, **changes)
